"""The level2 parent process (subcommand ``level2``): per backend a fresh
database and a ``_backend`` child; then the parity check, the report and
the ``--output`` JSON."""
import os
import time

from plone.pgcatalog.testing import pgserver

import shared

from .parity import check_parity
from .report import format_report
from .workload import SCENARIOS


def run_parent(args):
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    known = [b for b in shared.BACKENDS if b != "pgcatalog-standby"]
    for b in backends:
        if b not in known:
            raise SystemExit("unknown backend %r (known: %s; "
                             "pgcatalog-standby is level1 --standby's)"
                             % (b, ", ".join(known)))
    server = pgserver.server_dsn()
    env_info = shared.environment(server)
    shared.log("PostgreSQL %s over %s; backends: %s"
               % (env_info["postgresql"], env_info["connection"],
                  ", ".join(backends)))

    results, failures = {}, {}
    started = time.time()
    for name in backends:
        dsn = pgserver.fresh_database("bench_%s" % name)
        result_file = shared.result_file("bench-%s-" % name)
        cmd = shared.child_command(
            "_backend", "--name", name, "--dsn", dsn,
            "--docs", str(args.docs),
            "--modifications", str(args.modifications),
            "--iterations", str(args.iterations),
            "--warmup", str(args.warmup),
            "--cache-size", str(args.cache_size),
            "--result-file", result_file)
        if args.profile and name in args.profile_backends.split(","):
            cmd.append("--profile")
            if args.output:
                cmd += ["--profile-file", "%s.%s.pstats" % (
                    os.path.splitext(args.output)[0], name)]
        cmd += shared.pg_env_options(args.pg_env, name)
        shared.log("backend %s: fresh database %s"
                   % (name, dsn.split("dbname=")[-1].split()[0]))
        t0 = time.perf_counter()
        try:
            env = shared.child_environment(name, dsn)
            env[shared.LOG_ENV] = shared.log_file_for(name, args.output,
                                                      "level2")
            result, why = shared.run_child(cmd, env, result_file)
            if result is not None:
                results[name] = result
                results[name]["wall_s"] = time.perf_counter() - t0
            else:
                failures[name] = why
                shared.log("backend %s FAILED (%s)" % (name, why))
        finally:
            os.unlink(result_file)
            if not args.keep_databases:
                pgserver.drop_database(dsn)

    env_info["loadavg_end"] = os.getloadavg()
    parity = check_parity(results)
    report = format_report(results, failures, parity, env_info, args)
    print(report)
    if args.output:
        shared.write_json(args.output, shared.run_record(
            "level2", started, env_info, args,
            scenarios={s[0]: {"label": s[1], "query": s[2], "sorted": s[3]}
                       for s in SCENARIOS},
            backends=results,
            failures=failures,
            parity=parity,
            table=report))
        shared.log("wrote", args.output)
    if failures or not parity["ok"]:
        return 1
    return 0

"""The parent process of ``level1`` / ``concurrency``: per scale and backend a
database, a ``_level1_build`` and a ``_level1_query`` child; then the
parity check, the report, the charts and the JSON.  Also ``level1-report``
(:func:`run_merge`), the same from saved JSON files."""
import json
import os
import time
import types

from psycopg.conninfo import conninfo_to_dict
from psycopg.conninfo import make_conninfo

from plone.pgcatalog.testing import pgserver

import shared
from shared import BACKENDS
from shared import log
from shared import write_json

from .charts import write_charts
from .common import parse_list, source_state
from .databases import db_name, named_database, private_server, stored_build
from .parity import check_parity
from .report import format_report


def run_parent(args):
    scales = parse_list(args.scales)
    backends = [b for b in parse_list(args.backends, str)]
    for b in backends:
        if b not in BACKENDS:
            raise SystemExit("unknown backend %r" % b)
    args.threads_list = parse_list(args.concurrency_threads) \
        if args.concurrency_threads else []
    conc_scales = (parse_list(args.concurrency_scales)
                   if args.concurrency_scales else scales)
    servers = None
    if args.standby:
        if args.private_server or args.reuse_databases:
            raise SystemExit("--standby builds on a server of its own: not "
                             "with --private-server or --reuse-databases")
        # a primary and a streaming standby (testing/replication.py): what
        # is built on the primary is replayed there
        from plone.pgcatalog.testing.replication import ReplicatedServers
        servers = ReplicatedServers(standbys=1)
        server = servers.primary_dsn
    elif args.private_server:
        server = private_server(args.private_server,
                                args.max_locks_per_transaction)
    else:
        server = pgserver.server_dsn()
    env_info = shared.environment(server)
    env_info["private_server"] = args.private_server
    if args.private_server:
        env_info["max_locks_per_transaction"] = \
            args.max_locks_per_transaction
    env_info["source"] = source_state()
    log("level1: scales %s, backends %s, PostgreSQL %s over %s" % (
        scales, backends, env_info["postgresql"], env_info["connection"]))
    started = time.time()
    data = {}        # scale -> backend -> {"build":..., "query":...}
    failures = []
    skipped = []
    for scale in scales:
        data[scale] = {}
        for backend in backends:
            if backend == "zcatalog" and args.zcatalog_max_scale and \
                    scale > args.zcatalog_max_scale:
                skipped.append((scale, backend, "above --zcatalog-max-scale"))
                log("skipping zcatalog at %d (--zcatalog-max-scale %d)"
                     % (scale, args.zcatalog_max_scale))
                continue
            name = db_name(backend, scale, args.seed)
            dsn, existed = named_database(server, name,
                                           args.reuse_databases)
            env = shared.child_environment(backend, dsn)
            # level1 measures the engine: plone.pgcatalog's result cache off
            # unless --pg-env PGCATALOG_CACHE=on asks for it
            env.setdefault("PGCATALOG_CACHE", "off")
            pg_env = shared.pg_env_options(args.pg_env, backend)
            result_file = shared.result_file("l1-")
            entry = {}
            try:
                build = stored_build(dsn, backend, scale, args.seed,
                                     args.reuse_any_source) \
                    if existed else None
                if build is None:
                    if existed:
                        dsn, _ = named_database(server, name, False)
                        if backend == "pgcatalog":
                            env["PGCATALOG_DSN"] = dsn
                    log("%s %d: building in database %s" % (
                        backend, scale, name))
                    build, why = shared.run_child(
                        shared.child_command(
                            "_level1_build", "--name", backend, "--dsn", dsn,
                            "--scale", str(scale), "--seed", str(args.seed),
                            "--commit-every", str(args.commit_every),
                            "--build-cache-size", str(args.build_cache_size),
                            "--max-modified-objects",
                            str(args.max_modified_objects),
                            "--result-file", result_file, *pg_env),
                        env, result_file)
                    if build is None:
                        failures.append("%s %d build: %s" % (backend, scale,
                                                             why))
                        continue
                else:
                    log("%s %d: reusing the catalog built in %s" % (
                        backend, scale, name))
                entry["build"] = build
                cmd = shared.child_command(
                    "_level1_query", "--name", backend, "--dsn", dsn,
                    "--scale", str(scale), "--seed", str(args.seed),
                    "--cache-size", str(args.cache_size),
                    "--iterations", str(args.iterations),
                    "--warmup", str(args.warmup),
                    "--parity-max-paths", str(args.parity_max_paths),
                    "--max-seconds-per-query",
                    str(args.max_seconds_per_query),
                    "--concurrency-duration", str(args.concurrency_duration),
                    "--concurrency-warmup", str(args.concurrency_warmup),
                    "--result-file", result_file, *pg_env)
                if args.threads_list and scale in conc_scales:
                    cmd += ["--threads", ",".join(map(str,
                                                      args.threads_list))]
                if args.skip_queries:
                    cmd.append("--skip-queries")
                if args.only:
                    cmd += ["--only", args.only]
                query, why = shared.run_child(cmd, env, result_file)
                if query is None:
                    failures.append("%s %d queries: %s" % (backend, scale,
                                                           why))
                else:
                    entry["query"] = query
                if servers is not None and backend == "pgcatalog":
                    routed, why = _routed_run(servers, name, cmd, env,
                                              result_file)
                    if routed is None:
                        failures.append("pgcatalog-standby %d queries: %s"
                                        % (scale, why))
                    else:
                        data[scale]["pgcatalog-standby"] = {"query": routed}
            finally:
                os.unlink(result_file)
                if entry:
                    data[scale][backend] = entry
                if not (args.keep_databases or args.reuse_databases):
                    pgserver.drop_database(dsn)
    env_info["loadavg_end"] = os.getloadavg()
    parity = check_parity(data, args)
    report = format_report(data, parity, failures, skipped, env_info, args)
    print(report)
    chart_files = []
    if args.chart:
        try:
            chart_files = write_charts(data, args.chart)
            log("wrote", ", ".join(chart_files))
        except ImportError as exc:
            log("no chart (%s): pip install matplotlib" % exc)
    if args.output:
        write_json(args.output, shared.run_record(
            "level1" if not args.skip_queries else "concurrency", started,
            env_info, args,
            results={str(s): v for s, v in data.items()},
            failures=failures, skipped=skipped,
            parity=parity, table=report, charts=chart_files))
        log("wrote", args.output)
    return 1 if failures or not parity["ok"] else 0


def _routed_run(servers, name, cmd, env, result_file):
    """The query child ``cmd`` again, once the standby replayed the build,
    as ``pgcatalog-standby``: the catalog's reads routed to the standby
    (``PGCATALOG_STANDBY_DSNS``) and RelStorage loading from it
    (``ro-replica-conf``), so the catalog reads in RelStorage's snapshot
    there.  Its result and why it failed."""
    servers.wait_for_replay()
    standby_dsn = make_conninfo(servers.standby_dsns[0], dbname=name)
    params = conninfo_to_dict(standby_dsn)
    env = dict(env, PGCATALOG_STANDBY_DSNS=standby_dsn)
    cmd = list(cmd)
    cmd[cmd.index("--name") + 1] = "pgcatalog-standby"
    cmd += ["--ro-replica", "%s:%s" % (params["host"],
                                        params.get("port", 5432))]
    log("pgcatalog-standby: the same queries, reads routed to the standby")
    return shared.run_child(cmd, env, result_file)


def run_merge(args):
    """Report, parity and charts of several level1 JSON outputs together
    (e.g. a 10k/100k run and a separate 1M run); later files win for the
    same scale and backend."""
    data, failures, skipped, env_info, arguments = {}, [], [], None, None
    for name in args.files:
        with open(name) as f:
            run = json.load(f)
        env_info = env_info or run["environment"]
        arguments = arguments or run["arguments"]
        for scale, per in run["results"].items():
            data.setdefault(int(scale), {}).update(per)
        failures += run.get("failures", [])
        skipped += [tuple(x) for x in run.get("skipped", [])]
    done = {(s, b) for s, per in data.items() for b in per}
    skipped = [x for x in skipped if (x[0], x[1]) not in done]
    arguments["scales"] = ",".join(str(s) for s in sorted(data))
    ns = types.SimpleNamespace(**arguments)
    parity = check_parity(data, ns)
    report = format_report(data, parity, failures, skipped, env_info, ns)
    report = "(merged from %s)\n" % ", ".join(args.files) + report
    print(report)
    charts = write_charts(data, args.chart) if args.chart else []
    if args.output:
        write_json(args.output, {
            "benchmark": "level1", "merged_from": args.files,
            "environment": env_info, "arguments": arguments,
            "results": {str(s): v for s, v in data.items()},
            "failures": failures, "skipped": skipped, "parity": parity,
            "table": report, "charts": charts})
    return 1 if failures or not parity["ok"] else 0

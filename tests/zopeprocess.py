"""A Zope instance in processes of its own, spoken to over HTTP: made by
``mkwsgiinstance`` of a given ``bin`` directory, its catalog DSN in its
zope.conf, served by ``runwsgi`` on a free port of 127.0.0.1.

Used by the tests that need real processes and real HTTP
(test_installed_wheel.py on an installed copy of the wheel,
test_http_restart.py on this environment's).
"""
import base64
import json
import os
import random
import signal
import socket
import string
import subprocess
import textwrap
import time
import urllib.error
import urllib.request

import pytest


ADMIN = "admin"
START_TIMEOUT = 240
HTTP_TIMEOUT = 300
STOP_TIMEOUT = 60


def instance_env():
    """This environment, the catalog's settings left to an instance's
    zope.conf."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith("PGCATALOG_")}


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def make_instance(run, bin_dir, home, dsn, threads=None):
    """An instance made as Plone's documentation says for a pip install,
    with the catalog's DSN in its zope.conf (None: none, a stock site's
    instance) and a free port on 127.0.0.1: (home, password, port).
    ``run(argv)`` runs a command (and fails the test if it fails);
    ``threads``: waitress's, if not its default."""
    password = "".join(random.choice(string.ascii_letters) for _ in range(16))
    run([bin_dir / "mkwsgiinstance", "-d", home,
         "-u", "%s:%s" % (ADMIN, password)])
    if dsn is not None:
        with open(home / "etc" / "zope.conf", "a") as f:
            f.write(textwrap.dedent("""
                <product-config plone.pgcatalog>
                    dsn %s
                </product-config>
                """) % dsn)
    port = free_port()
    ini = home / "etc" / "zope.ini"
    lines = []
    for line in ini.read_text().splitlines():
        if line.startswith("host ="):
            line = "host = 127.0.0.1"
        elif line.startswith("port ="):
            line = "port = %d" % port
            if threads:
                lines.append("threads = %d" % threads)
        lines.append(line)
    ini.write_text("\n".join(lines) + "\n")
    return home, password, port


class Server:
    """``runwsgi etc/zope.ini`` in a process of its own, its output in a
    file."""

    def __init__(self, bin_dir, env, home, password, port):
        self.bin_dir = bin_dir
        self.env = env
        self.home = home
        self.base = "http://127.0.0.1:%d" % port
        self.auth = "Basic " + base64.b64encode(
            ("%s:%s" % (ADMIN, password)).encode()).decode()
        self.output = home / "runwsgi.out"
        self.process = None

    def start(self):
        with open(self.output, "ab") as out:
            self.process = subprocess.Popen(
                [str(self.bin_dir / "runwsgi"),
                 str(self.home / "etc" / "zope.ini")],
                stdout=out, stderr=subprocess.STDOUT, env=self.env,
                cwd=str(self.home), start_new_session=True)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self.fail("runwsgi exited %d at start-up"
                          % self.process.returncode)
            try:
                self.request("GET", "/", timeout=5)
                return
            except (urllib.error.URLError, ConnectionError, OSError):
                time.sleep(1)
        self.fail("runwsgi did not answer in %d s" % START_TIMEOUT)

    def stop(self):
        """Terminate and wait; the exit status, or None if it had to be
        killed."""
        if self.process is None or self.process.poll() is not None:
            return None if self.process is None else self.process.returncode
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            return self.process.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(STOP_TIMEOUT)
            return None

    def log(self):
        """What the instance wrote (its output, then its event log), the
        end of each."""
        parts = []
        for path in (self.output, self.home / "var" / "log" / "event.log"):
            if path.exists():
                text = path.read_text(errors="replace")
                parts.append("--- %s ---\n%s" % (path.name, text[-15000:]))
        return "\n".join(parts)

    def fail(self, message):
        pytest.fail("%s\n%s" % (message, self.log()), pytrace=False)

    def request(self, method, path, data=None, json_api=False,
                timeout=HTTP_TIMEOUT, headers=None):
        """(status, body) of one request as the admin."""
        sent = {"Authorization": self.auth}
        body = None
        if json_api:
            sent["Accept"] = "application/json"
        if data is not None:
            sent["Content-Type"] = "application/json"
            body = json.dumps(data).encode()
        sent.update(headers or {})
        req = urllib.request.Request(self.base + path, data=body,
                                     headers=sent, method=method)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode(errors="replace")

    def expect(self, status, method, path, **kw):
        """The body of a request that must answer ``status`` (an int or a
        tuple of them); JSON decoded for the JSON API."""
        got, body = self.request(method, path, **kw)
        wanted = status if isinstance(status, tuple) else (status,)
        if got not in wanted:
            self.fail("%s %s answered %d, not %s:\n%s" % (
                method, path, got, status, body[:3000]))
        if kw.get("json_api") and body.strip():
            return json.loads(body)
        return body

    def make_site(self, site_id, title="A site", addon=True):
        """A classic Plone site through plone.distribution's ``@sites``,
        plone.pgcatalog installed through plone.restapi's ``@addons``."""
        site = self.expect(200, "POST", "/@sites", json_api=True, data={
            "distribution": "classic", "site_id": site_id, "title": title,
            "description": "", "default_language": "en",
            "portal_timezone": "UTC", "setup_content": True})
        assert site["id"] == site_id
        if addon:
            self.expect((200, 204), "POST",
                        "/%s/@addons/plone.pgcatalog/install" % site_id,
                        json_api=True)
        return site

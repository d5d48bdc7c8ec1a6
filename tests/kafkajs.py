"""kafkajs, the Node.js client, from the npm registry (no build step: plain JavaScript), run by ``node`` on
``tests/kafkajs_scenario.js`` or ``tests/kafkajs_security.js`` against a broker, or on
``tests/kafkajs_failover.js`` against a cluster."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import tarfile
import urllib.request

from tests.brokerproc import ROOT

VERSION = "2.2.4"
PACKAGE_URL = f"https://registry.npmjs.org/kafkajs/-/kafkajs-{VERSION}.tgz"
CACHE = os.path.join(ROOT, ".cache", f"kafkajs-{VERSION}")
SCENARIO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kafkajs_scenario.js")
FAILOVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kafkajs_failover.js")
SECURITY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kafkajs_security.js")


def package() -> str:
    """kafkajs's package folder, fetched on first use (a lock keeps two test workers from fetching at once)."""
    folder = os.path.join(CACHE, "package")
    os.makedirs(CACHE, exist_ok=True)
    with open(os.path.join(CACHE, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.exists(os.path.join(folder, "index.js")):
            request = urllib.request.Request(PACKAGE_URL, headers={"User-Agent": "kbroker-tests"})
            archive = os.path.join(CACHE, "kafkajs.tgz")
            with urllib.request.urlopen(request, timeout=120) as answer, open(archive, "wb") as f:
                f.write(answer.read())
            shutil.rmtree(folder, ignore_errors=True)
            with tarfile.open(archive) as tgz:
                tgz.extractall(CACHE, filter="data")
    return folder


def run_scenario(bootstrap: str, timeout: float = 120) -> dict:
    """What the scenario saw, as its JSON; AssertionError with its output if it failed."""
    return run_node(SCENARIO, [bootstrap], timeout)


def run_security(bootstrap: str, mechanism: str, user: tuple[str, str], ca: str | None, records: int, gap_ms: int,
                 timeout: float = 120) -> dict:
    """``kafkajs_security.js`` over a SASL listener (TLS when ``ca`` is given): what it saw, as its JSON."""
    return run_node(SECURITY, [bootstrap, mechanism.lower(), *user, ca or "-", str(records), str(gap_ms)], timeout)


def run_node(script: str, args: list[str], timeout: float) -> dict:
    done = subprocess.run(["node", script, *args], env=dict(os.environ, KAFKAJS=package()),
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_failover(bootstrap: str, topic: str, kill, timeout: float = 240) -> dict:
    """``kafkajs_failover.js``, calling ``kill()`` when it says it is killing (its producer keeps sending
    meanwhile): what it saw, as its JSON."""
    with subprocess.Popen(["node", FAILOVER, bootstrap, topic], env=dict(os.environ, KAFKAJS=package()),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as node:
        try:
            lines = []
            for line in node.stdout:
                lines.append(line.strip())
                if line.strip() == "killing":
                    kill()
            node.wait(timeout)
        finally:
            node.kill()
        errors = node.stderr.read()
    assert node.returncode == 0, "\n".join(lines)[-3000:] + errors[-6000:]
    assert not errors, errors[-6000:]
    return json.loads(lines[-1])

"""librdkafka's rdkafka_performance as the load generator.

Debian's librdkafka-dev ships ``examples/rdkafka_performance.c``; it includes
two of librdkafka's internal headers (``rd.h``, ``rdtime.h``), for which
``bench/rdkafka_shim`` stands in. It is linked against the newer librdkafka
inside the confluent-kafka wheel, the same library the tests use.
"""

from __future__ import annotations

import glob
import os
import subprocess
import tempfile
import time
from dataclasses import dataclass

from tests.brokerproc import ROOT

EXAMPLE = "/usr/share/doc/librdkafka-dev/examples/rdkafka_performance.c"
SHIM = os.path.join(ROOT, "bench", "rdkafka_shim", "include")
BUILD = os.path.join(ROOT, ".cache", "bench")


def librdkafka_path() -> str:
    import confluent_kafka

    libs = os.path.join(os.path.dirname(os.path.dirname(confluent_kafka.__file__)), "confluent_kafka.libs")
    return glob.glob(os.path.join(libs, "librdkafka*.so*"))[0]


def build() -> str:
    binary = os.path.join(BUILD, "rdkafka_performance")
    if os.path.exists(binary):
        return binary
    if not os.path.exists(EXAMPLE):
        raise SystemExit("install Debian's librdkafka-dev (make bench does) for examples/rdkafka_performance.c")
    os.makedirs(BUILD, exist_ok=True)
    lib = librdkafka_path()
    subprocess.run(["gcc", "-O2", "-w", "-o", binary, EXAMPLE, "-iquote", SHIM, "-I", SHIM, lib,
                    f"-Wl,-rpath,{os.path.dirname(lib)}", "-lm", "-lpthread"], check=True)
    return binary


@dataclass
class Run:
    messages: int
    seconds: float
    msgs_per_s: float
    mb_per_s: float
    loadgen_cpu: float    # share of one core used by the generator
    broker_cpu: float     # share of one core used by the broker
    broker_cpu_seconds: float = 0.0   # the broker's CPU (utime + stime) over the run (a cluster's: summed)


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) a process has used so far, from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


class TimedOut(Exception):
    pass


def run(args: list[str], broker_pid: int | list[int], timeout: float = 120) -> Run:
    """Run the generator; parse its last table row; measure both processes' CPU.

    Raises TimedOut when the generator has not finished within ``timeout``
    (a broker that never delivers the records asked for).
    """
    binary = build()
    pids = broker_pid if isinstance(broker_pid, list) else [broker_pid]   # a cluster's brokers are summed
    broker_cpu0 = sum(cpu_seconds(p) for p in pids)
    started = time.monotonic()
    out = tempfile.TemporaryFile()
    proc = subprocess.Popen([binary, *args, "-q", "-u"], stdout=out, stderr=subprocess.STDOUT)
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() - started > timeout:
            proc.kill()
            proc.wait()
            raise TimedOut(f"no result within {timeout:.0f} s")
        time.sleep(0.05)
    wall = time.monotonic() - started
    out.seek(0)
    output = out.read().decode(errors="replace")
    broker_cpu_s = sum(cpu_seconds(p) for p in pids) - broker_cpu0
    rows = [line for line in output.splitlines() if line.startswith("|") and "elapsed" not in line]
    if not rows or os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"rdkafka_performance failed: {output[-2000:]}")
    cols = [c.strip() for c in rows[-1].strip("|").split("|")]
    elapsed_ms, msgs = int(cols[0]), int(cols[1])
    if "-P" in args:   # elapsed, msgs, bytes, rtt, dr, dr_m/s, dr_MB/s, ...
        rate, mbs = float(cols[5]), float(cols[6])
    else:              # elapsed, msgs, bytes, rtt, m/s, MB/s, ...
        rate, mbs = float(cols[4]), float(cols[5])
    return Run(msgs, elapsed_ms / 1000, rate, mbs, (usage.ru_utime + usage.ru_stime) / wall, broker_cpu_s / wall,
               broker_cpu_s)

"""ProcessClock tells a process that was stopped (SIGSTOP) from one whose main thread was only busy: a broker
fences its leaderships after the first, and keeps them after the second (its ZooKeeper session lived on)."""

import os
import signal
import subprocess
import sys
import textwrap
import time

from kbroker.broker.cluster.process_clock import ProcessClock

LIMIT_S = 0.3

_ASKED = textwrap.dedent(f"""
    import sys, time
    from kbroker.broker.cluster.process_clock import ProcessClock
    clock, since = ProcessClock({LIMIT_S}), time.monotonic()
    print("ready", flush=True)
    for line in sys.stdin:   # each line asks: stopped since the last question?
        now = time.monotonic()
        print(clock.stopped_since(since, now), flush=True)
        since = now
""")


def test_a_main_thread_busy_past_the_limit_is_not_a_stopped_process():
    clock = ProcessClock(LIMIT_S)
    try:
        since = time.monotonic()
        while time.monotonic() - since < 4 * LIMIT_S:   # (pure Python: the GIL changes hands meanwhile)
            sum(range(1000))
        assert not clock.stopped_since(since, time.monotonic())
    finally:
        clock.close()


def test_a_process_stopped_past_the_limit_is_seen_stopped():
    proc = subprocess.Popen([sys.executable, "-c", _ASKED], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        os.kill(proc.pid, signal.SIGSTOP)
        time.sleep(3 * LIMIT_S)   # (the fault itself: stopped this long)
        os.kill(proc.pid, signal.SIGCONT)
        proc.stdin.write("?\n")
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == "True"
    finally:
        proc.kill()
        proc.wait()

"""Jars from Maven Central, gathered once into a cache: ``mvn dependency:copy-dependencies`` of a project's
runtime dependencies (Spark's Kafka connector for a PySpark session; Kafka's own jars for the tests beside
Apache Kafka)."""

from __future__ import annotations

import fcntl
import os
import subprocess


def gather_once(pom: str, cache: str, what: str, *properties: str) -> str:
    """``cache``/libs, holding ``pom``'s runtime dependencies, filled by Maven on first use (``properties``:
    ``-Dname=value`` for the pom).

    A lock file keeps two processes from filling the same cache at once; the ``complete`` marker is written
    last, so a cache an interrupted ``mvn`` left half full is filled again. Raises RuntimeError naming
    ``what`` and Maven's complaint if it cannot gather them."""
    libs, done = os.path.join(cache, "libs"), os.path.join(cache, "complete")
    os.makedirs(cache, exist_ok=True)
    with open(os.path.join(cache, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.exists(done):
            run = subprocess.run(["mvn", "-q", "-B", "-f", pom, *properties, "dependency:copy-dependencies",
                                  f"-DoutputDirectory={libs}", "-DincludeScope=runtime"],
                                 capture_output=True, text=True)
            if run.returncode != 0:
                raise RuntimeError(f"mvn could not gather {what}:\n{run.stdout}{run.stderr}")
            open(done, "w").close()
    return libs

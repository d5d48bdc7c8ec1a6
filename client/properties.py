"""Java properties files as Kafka's tools read them (``server.properties``, a client's ``--command-config``)."""

from __future__ import annotations


def read_properties(path: str) -> dict[str, str]:
    """Java properties, the subset Kafka's files use: ``key=value`` or ``key: value``, # and ! comments, a
    trailing backslash continuing the value on the next line (as JAAS entries are usually written)."""
    result = {}
    with open(path, encoding="utf-8") as f:
        lines = iter(f)
        for line in lines:
            line = line.strip()
            while line.endswith("\\") and (len(line) - len(line.rstrip("\\"))) % 2 == 1:
                line = line[:-1] + next(lines, "").strip()
            if not line or line[0] in "#!":
                continue
            for sep in ("=", ":"):
                if sep in line:
                    key, value = line.split(sep, 1)
                    result[key.strip()] = value.strip()
                    break
    return result

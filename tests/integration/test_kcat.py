"""kcat (librdkafka's console client, Debian package) against a real kbroker."""

import json
import shutil
import subprocess

import pytest

pytestmark = pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is installed by `make test` (apt)")


def kcat(broker, *args, stdin=None):
    result = subprocess.run(["kcat", "-b", broker.bootstrap, *args], input=stdin, capture_output=True, timeout=60)
    assert result.returncode == 0, result.stderr.decode()
    return result.stdout


def test_produce_consume_with_keys_and_metadata(broker, topic_name):
    lines = "".join(f"key{i % 9}:value {i}\n" for i in range(3000)).encode()
    kcat(broker, "-P", "-t", topic_name, "-K", ":", "-z", "lz4", stdin=lines)
    out = kcat(broker, "-C", "-t", topic_name, "-o", "beginning", "-e", "-J")
    records = [json.loads(line) for line in out.splitlines()]
    assert len(records) == 3000
    assert [r["payload"] for r in records] == [f"value {i}" for i in range(3000)]
    assert records[5]["key"] == "key5" and records[-1]["offset"] == 2999
    metadata = json.loads(kcat(broker, "-L", "-J", "-t", topic_name))
    assert metadata["topics"][0]["topic"] == topic_name
    assert metadata["brokers"][0]["id"] == 0


def test_consume_from_offset_and_tail(broker, topic_name):
    kcat(broker, "-P", "-t", topic_name, stdin=b"".join(b"m%d\n" % i for i in range(50)))
    out = kcat(broker, "-C", "-t", topic_name, "-o", "45", "-e", "-f", "%o %s\n")
    assert out.decode().splitlines() == [f"{i} m{i}" for i in range(45, 50)]
    out = kcat(broker, "-C", "-t", topic_name, "-o", "-3", "-e", "-f", "%s\n")
    assert out.decode().splitlines() == ["m47", "m48", "m49"]

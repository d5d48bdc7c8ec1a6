"""The ``kbroker`` pytest fixture (entry point ``pytest11``): a real broker in the test process, per test.

    def test_roundtrip(kbroker):
        producer = Producer({"bootstrap.servers": kbroker.bootstrap_servers})

Its data lives in the test's ``tmp_path``; override the ``kbroker_config`` fixture (a dict of broker
settings, Kafka's names) in a conftest.py to change them.
"""

from __future__ import annotations

import pytest


@pytest.fixture
def kbroker_config() -> dict[str, str]:
    return {}


@pytest.fixture
def kbroker(tmp_path, kbroker_config):
    from kbroker.broker.embedded import KBroker

    with KBroker(str(tmp_path / "kbroker"), kbroker_config) as broker:
        yield broker

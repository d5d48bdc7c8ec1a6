"""Dynamic broker configs: the layers' precedence and the validation rules (Kafka's DynamicBrokerConfig)."""

from kbroker.broker.configuration.config import BrokerConfig
from kbroker.broker.configuration.dynamic_config import validate


def test_this_brokers_layer_beats_the_default_which_beats_the_static_value():
    config = BrokerConfig.load(overrides=["message.max.bytes=2000", "log.retention.hours=1"], environ={})
    changed = config.layer({"message.max.bytes": 3000, "log.retention.ms": 10}, {"message.max.bytes": 4000})
    assert changed == {"message.max.bytes", "log.retention.ms"}
    assert config["message.max.bytes"] == 4000
    assert config.retention_ms == 10                       # ms set dynamically wins over the static hours
    assert config.log_config().max_message_bytes == 4000
    assert config.layer({}, {}) == {"message.max.bytes", "log.retention.ms"}
    assert config["message.max.bytes"] == 2000 and config.retention_ms == 3600000


def test_only_runtime_keys_with_valid_values_are_accepted():
    config = BrokerConfig.load(overrides=["listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0"], environ={})
    assert validate({"log.retention.ms": "1000", "log.cleanup.policy": "compact,delete"}, False, config) is None
    assert "dynamically" in validate({"log.dirs": "/x"}, True, config)
    assert validate({"log.retention.mss": "1"}, True, config) is None    # a custom config, as Kafka allows
    assert "message.max.bytes" in validate({"message.max.bytes": "big"}, True, config)
    assert "log.cleanup.policy" in validate({"log.cleanup.policy": "shred"}, True, config)
    assert "min.insync.replicas" in validate({"min.insync.replicas": "0"}, True, config)
    assert validate({"num.replica.fetchers": "2"}, True, config) is None
    assert "num.replica.fetchers" in validate({"num.replica.fetchers": "3"}, True, config)   # more than doubled
    assert validate({"advertised.listeners": "SSL://example.com:9093"}, True, config) is None
    assert "broker id must be specified" in validate({"advertised.listeners": "SSL://example.com:9093"}, False,
                                                     config)
    assert "PLAIN" in validate({"advertised.listeners": "PLAIN://example.com:9093"}, True, config)
    assert "max.connections.per.ip.overrides" in validate({"max.connections.per.ip.overrides": "a"}, True, config)

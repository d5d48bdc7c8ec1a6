import pytest

from kbroker.broker.configuration.config import BrokerConfig, ConfigError


def test_properties_env_and_overrides_in_order(tmp_path):
    props = tmp_path / "server.properties"
    props.write_text("# comment\nlog.dirs=/a,/b\nnum.partitions=3\nlog.retention.minutes=5\n")
    config = BrokerConfig.load(str(props), ["num.partitions=7"], environ={"KBROKER_AUTO_CREATE_TOPICS_ENABLE": "false",
                                                                         "KBROKER_NUM_PARTITIONS": "5"})
    assert config.log_dirs == ["/a", "/b"]
    assert config["num.partitions"] == 7
    assert config["auto.create.topics.enable"] is False
    assert config.retention_ms == 300000


def test_retention_precedence_and_defaults():
    assert BrokerConfig.load(environ={}).retention_ms == 168 * 3600000
    both = BrokerConfig.load(overrides=["log.retention.ms=10", "log.retention.hours=1"], environ={})
    assert both.retention_ms == 10
    assert both.log_config().retention_ms == 10


def test_invalid_values_fail_with_the_key_named():
    with pytest.raises(ConfigError, match="num.partitions"):
        BrokerConfig.load(overrides=["num.partitions=many"], environ={})
    with pytest.raises(ConfigError, match="auto.create.topics.enable"):
        BrokerConfig.load(overrides=["auto.create.topics.enable=yes"], environ={})
    with pytest.raises(ConfigError, match="offsets.topic.compression.codec.*Unknown compression type id: 5"):
        BrokerConfig.load(overrides=["offsets.topic.compression.codec=5"], environ={})
    with pytest.raises(ConfigError, match="group.share.delivery.count.limit.*no more than 10"):
        BrokerConfig.load(overrides=["group.share.delivery.count.limit=11"], environ={})


def test_node_id_wins_over_broker_id_and_listeners_parse():
    config = BrokerConfig.load(overrides=["node.id=4", "broker.id=1", "listeners=PLAINTEXT://:9093"], environ={})
    assert config.broker_id == 4
    assert config.listeners == [("PLAINTEXT", "", 9093)]
    assert config.advertised_listeners == config.listeners

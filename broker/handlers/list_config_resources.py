"""ListConfigResources (KIP-1142): the config resources there are, by type: topics (2), brokers (4), groups with
configs of their own (32) and client metrics subscriptions (16, KIP-714's CLIENT_METRICS resources). v0
(ListClientMetricsResources) lists client metrics only; an empty type list means every type; an unknown type
is UNSUPPORTED_VERSION, as Kafka answers."""

from kbroker.protocol.acls import DESCRIBE_CONFIGS
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.list_config_resources import LIST_CONFIG_RESOURCES as API  # noqa: F401

TOPIC, BROKER, CLIENT_METRICS, GROUP = 2, 4, 16, 32


def handle(ctx, request):
    if not ctx.cluster_authorized(DESCRIBE_CONFIGS):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "config_resources": []}
    broker = ctx.broker
    types = set(request.resource_types) if ctx.api_version >= 1 else {CLIENT_METRICS}
    if types - {TOPIC, BROKER, CLIENT_METRICS, GROUP}:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.UNSUPPORTED_VERSION, "config_resources": []}
    wanted = types or {TOPIC, BROKER, CLIENT_METRICS, GROUP}
    found = []
    if TOPIC in wanted:
        found += [(name, TOPIC) for name in sorted(broker.metadata.topics)]
    if BROKER in wanted:
        found += [(str(b[0]), BROKER) for b in broker.live_brokers()]
    if CLIENT_METRICS in wanted:
        found += [(name, CLIENT_METRICS) for name, configs in sorted(broker.metadata.client_metrics.items()) if configs]
    if GROUP in wanted:
        found += [(name, GROUP) for name, configs in sorted(broker.metadata.group_configs.items()) if configs]
    return {"throttle_time_ms": 0, "error_code": 0,
            "config_resources": [{"resource_name": n, "resource_type": t} for n, t in found]}

"""ApiVersions: what this broker implements, generated from the handler registry, with its feature levels
(v3+, KIP-584)."""

from kbroker.broker.configuration.features import api_versions_features
from kbroker.protocol.messages.api_versions import API_VERSIONS as API  # noqa: F401  (the registry reads API)


def handle(ctx, request):
    from kbroker.broker.network.registry import api_versions_list

    answer = {"error_code": 0, "api_keys": api_versions_list(), "throttle_time_ms": 0}
    if ctx.api_version >= 3:
        answer.update(api_versions_features(ctx.broker.config))
    return answer

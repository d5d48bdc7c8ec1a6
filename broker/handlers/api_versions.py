"""ApiVersions: what this broker implements, generated from the handler registry."""

from kbroker.protocol.messages.api_versions import API_VERSIONS as API  # noqa: F401  (the registry reads API)


def handle(ctx, request):
    from kbroker.broker.network.registry import api_versions_list

    return {"error_code": 0, "api_keys": api_versions_list(), "throttle_time_ms": 0}

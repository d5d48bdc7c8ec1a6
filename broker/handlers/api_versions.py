"""ApiVersions: what this broker implements, generated from the handler registry, with its feature levels
(v3+, KIP-584).

From v3 the client names its software (KIP-511): a name or version other than letters and digits, with '.'
and '-' inside, is INVALID_REQUEST with no API listed, as Kafka answers it; the connection goes on."""

import re

from kbroker.broker.configuration.features import api_versions_features
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.api_versions import API_VERSIONS as API  # noqa: F401  (the registry reads API)

TELEMETRY_APIS = (71, 72)   # GetTelemetrySubscriptions, PushTelemetry
_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9.-]*[a-zA-Z0-9])?")


def handle(ctx, request):
    from kbroker.broker.network.registry import api_versions_list

    keys = api_versions_list()
    if not ctx.broker.client_telemetry.enabled:   # (no receiver for client metrics: Kafka leaves them out too)
        keys = [k for k in keys if k["api_key"] not in TELEMETRY_APIS]
    answer = {"error_code": 0, "api_keys": keys, "throttle_time_ms": 0}
    if ctx.api_version >= 3 and not (_SOFTWARE.fullmatch(request.client_software_name)
                                     and _SOFTWARE.fullmatch(request.client_software_version)):
        ctx.log.info("client_software_refused", name=request.client_software_name,
                     version=request.client_software_version)
        return {"error_code": ErrorCode.INVALID_REQUEST, "api_keys": [], "throttle_time_ms": 0}
    if ctx.api_version >= 3:
        if ctx.connection is not None:
            ctx.connection.client_software = (request.client_software_name, request.client_software_version)
        metadata = ctx.broker.metadata
        answer.update(api_versions_features(ctx.broker.config, metadata.features, metadata.features_epoch))
    return answer

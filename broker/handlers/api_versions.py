"""ApiVersions: what this broker implements, generated from the handler registry, with its feature levels
(v3+, KIP-584).

From v3 the client names its software (KIP-511): a name or version other than letters and digits, with '.'
and '-' inside, is INVALID_REQUEST with no API listed, as Kafka answers it; the connection goes on."""

import re

from kbroker.broker.configuration.features import api_versions_features, finalized
from kbroker.broker.network.context import EncodedBody
from kbroker.protocol import schema
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.api_versions import API_VERSIONS as API  # noqa: F401  (the registry reads API)

TELEMETRY_APIS = (71, 72)   # GetTelemetrySubscriptions, PushTelemetry
_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9.-]*[a-zA-Z0-9])?")


def handle(ctx, request):
    if ctx.api_version >= 3 and not (_SOFTWARE.fullmatch(request.client_software_name)
                                     and _SOFTWARE.fullmatch(request.client_software_version)):
        ctx.log.info("client_software_refused", name=request.client_software_name,
                     version=request.client_software_version)
        return {"error_code": ErrorCode.INVALID_REQUEST, "api_keys": [], "throttle_time_ms": 0}
    broker = ctx.broker
    telemetry = broker.client_telemetry.enabled
    if ctx.api_version < 3:
        key = (ctx.api_version, telemetry)
    else:
        if ctx.connection is not None:
            ctx.connection.client_software = (request.client_software_name, request.client_software_version)
        metadata = broker.metadata
        key = (ctx.api_version, telemetry, metadata.features_epoch,
               tuple(finalized(broker.config, metadata.features).items()))
    body = _ANSWERS.get(key)
    if body is None:
        body = _ANSWERS[key] = _encoded(ctx, telemetry)
        if len(_ANSWERS) > 64:   # (features updated many times: keep the newest)
            del _ANSWERS[next(iter(_ANSWERS))]
    return body


# Every client opens each connection with ApiVersions, and the answer depends only on the request's version,
# whether client telemetry is on and the finalized features: it is encoded once per such key (encoding the
# ~90 APIs was most of what the broker did for a client that pipelined ApiVersions requests).
_ANSWERS: dict[tuple, EncodedBody] = {}


def _encoded(ctx, telemetry: bool) -> EncodedBody:
    from kbroker.broker.network.registry import api_versions_list

    keys = api_versions_list()
    if not telemetry:   # (no receiver for client metrics: Kafka leaves them out too)
        keys = [k for k in keys if k["api_key"] not in TELEMETRY_APIS]
    answer = {"error_code": 0, "api_keys": keys, "throttle_time_ms": 0}   # (exempt from request quotas)
    if ctx.api_version >= 3:
        metadata = ctx.broker.metadata
        answer.update(api_versions_features(ctx.broker.config, metadata.features, metadata.features_epoch,
                                            version=ctx.api_version))
    out, _ = schema.encode(schema.struct_for(API.key, ctx.api_version, False), answer)
    return EncodedBody(out.getvalue())

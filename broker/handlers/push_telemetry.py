"""PushTelemetry (KIP-714): a client's metrics, in OTLP, under the subscription it was given
(``broker.client_telemetry``; served on ``/metrics``)."""

from kbroker.broker.network.context import CLOSE_CONNECTION
from kbroker.protocol.messages.push_telemetry import PUSH_TELEMETRY as API  # noqa: F401  (the registry reads API)


def handle(ctx, request):
    telemetry = ctx.broker.client_telemetry
    if not telemetry.enabled:
        return CLOSE_CONNECTION
    return {"throttle_time_ms": 0, "error_code": telemetry.push(ctx, request)}

"""PushTelemetry (KIP-714): a client's metrics, in OTLP, under the subscription it was given
(``broker.client_telemetry``; served on ``/metrics``). Answered even where not advertised (no
``metrics.port``), as Kafka's: the metrics are then checked against the subscription and dropped."""

from kbroker.protocol.messages.push_telemetry import PUSH_TELEMETRY as API  # noqa: F401  (the registry reads API)


def handle(ctx, request):
    telemetry = ctx.broker.client_telemetry
    return {"throttle_time_ms": 0, "error_code": telemetry.push(ctx, request)}

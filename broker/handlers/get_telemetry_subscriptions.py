"""GetTelemetrySubscriptions (KIP-714): which of its metrics a client pushes, and how often
(``broker.client_telemetry``). Advertised only while a receiver is there (``metrics.port``), but answered
either way, as Kafka answers it without a receiver plugin."""

from kbroker.protocol.messages.get_telemetry_subscriptions import GET_TELEMETRY_SUBSCRIPTIONS as API  # noqa: F401


def handle(ctx, request):
    telemetry = ctx.broker.client_telemetry
    return telemetry.get_subscriptions(ctx, bytes(request.client_instance_id))

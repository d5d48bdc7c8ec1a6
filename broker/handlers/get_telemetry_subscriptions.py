"""GetTelemetrySubscriptions (KIP-714): which of its metrics a client pushes, and how often
(``broker.client_telemetry``). Offered only while a receiver is there (``metrics.port``); otherwise the
connection closes, as Kafka treats an API it does not offer."""

from kbroker.broker.network.context import CLOSE_CONNECTION
from kbroker.protocol.messages.get_telemetry_subscriptions import GET_TELEMETRY_SUBSCRIPTIONS as API  # noqa: F401


def handle(ctx, request):
    telemetry = ctx.broker.client_telemetry
    if not telemetry.enabled:
        return CLOSE_CONNECTION
    return telemetry.get_subscriptions(ctx, bytes(request.client_instance_id))

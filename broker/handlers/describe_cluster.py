"""DescribeCluster: the live brokers, the cluster id and the controller."""

from kbroker.broker.handlers.metadata import cluster_operations
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.describe_cluster import DESCRIBE_CLUSTER as API  # noqa: F401  (the registry reads API)

BROKERS_ENDPOINT, CONTROLLERS_ENDPOINT = 1, 2


def handle(ctx, request):
    broker = ctx.broker
    if ctx.api_version >= 1 and request.endpoint_type != BROKERS_ENDPOINT:
        # (as a Kafka broker: controllers are asked of a controller; the answer names the broker endpoint type)
        error, message = (ErrorCode.MISMATCHED_ENDPOINT_TYPE, "The request was sent to an endpoint of type BROKER, "
                          "but we wanted an endpoint of type CONTROLLER") \
            if request.endpoint_type == CONTROLLERS_ENDPOINT else \
            (ErrorCode.UNSUPPORTED_ENDPOINT_TYPE, f"Unsupported endpoint type {request.endpoint_type}")
        return {"error_code": error, "error_message": message, "endpoint_type": BROKERS_ENDPOINT,
                "cluster_id": "", "controller_id": -1, "brokers": []}   # (Kafka's error answer names no cluster)
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "endpoint_type": BROKERS_ENDPOINT,
            "cluster_id": broker.cluster_id, "controller_id": broker.controller_id,
            "brokers": [{"broker_id": b, "host": host, "port": port, "rack": rack}
                        for b, host, port, rack in broker.live_brokers(ctx.listener)],
            "cluster_authorized_operations": cluster_operations(ctx, request.include_cluster_authorized_operations)}

"""ConsumerGroupHeartbeat (KIP-848): joins, keeps and reconciles a member of a consumer group; the
coordinator assigns. Refused with UNSUPPORTED_VERSION when ``group.coordinator.rebalance.protocols`` leaves
out ``consumer`` or ``group.version`` is finalized at 0, as Kafka does."""

from kbroker.broker.configuration import features
from kbroker.broker.handlers.common import client_host, coordinator_error, group_shard, when_replicated
from kbroker.coordinators.group.consumer.heartbeat import error_response
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.consumer_group_heartbeat import CONSUMER_GROUP_HEARTBEAT as API  # noqa: F401


def handle(ctx, request):
    coordinator = ctx.broker.group_coordinator
    if features.level(ctx.broker, "group.version") < 1:   # (0 also while the config leaves the protocol out)
        return error_response(ErrorCode.UNSUPPORTED_VERSION, "The new group coordinator is not enabled.")
    error = coordinator_error(ctx, request.group_id)
    if error:
        return error_response(error)
    answer = coordinator.consumer_group_heartbeat(
        version=ctx.api_version, group_id=request.group_id, member_id=request.member_id,
        member_epoch=request.member_epoch, instance_id=request.instance_id, rack_id=request.rack_id,
        rebalance_timeout_ms=request.rebalance_timeout_ms, subscribed_topic_names=request.subscribed_topic_names,
        subscribed_topic_regex=request.subscribed_topic_regex, server_assignor=request.server_assignor,
        topic_partitions=request.topic_partitions, client_id=ctx.client_id or "", client_host=client_host(ctx))
    return when_replicated(ctx, *group_shard(ctx, request.group_id), answer)

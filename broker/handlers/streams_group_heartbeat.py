"""StreamsGroupHeartbeat (KIP-1071): joins, keeps and leaves a member of a streams group; the coordinator
configures the topology against the cluster's topics, creates the internal topics it lacks and assigns tasks.

Before the coordinator, as Kafka's request handler: UNSUPPORTED_VERSION while ``streams.version`` is finalized at
0 (or ``group.coordinator.rebalance.protocols`` leaves out ``streams``), READ on the group, and for a topology the
topics it names: none of Kafka's internal topics, every name valid, DESCRIBE on each. Internal topics are created
when the principal may CREATE on the cluster or on each of them, else the answer's MISSING_INTERNAL_TOPICS status
says which it may not create.
"""

from kbroker.broker.configuration import features
from kbroker.broker.handlers.common import client_host, coordinator_error, group_shard, when_replicated
from kbroker.broker.handlers.create_topics import create_on_behalf
from kbroker.broker.metadata import topic_name_invalid
from kbroker.coordinators.group.streams.validation import streams_error_response
from kbroker.coordinators.group.streams.topology import MISSING_INTERNAL_TOPICS, InvalidTopology
from kbroker.protocol.acls import CREATE, DESCRIBE, TOPIC
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.streams_group_heartbeat import STREAMS_GROUP_HEARTBEAT as API  # noqa: F401

KAFKA_INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state", "__share_group_state")


def _required_topics(topology) -> list[str]:
    names: dict[str, None] = {}
    for s in topology.subtopologies:
        for name in (*s.source_topics, *s.repartition_sink_topics, *(t.name for t in s.repartition_source_topics),
                     *(t.name for t in s.state_changelog_topics)):
            names[name] = None
    return list(names)


def _topology_refusal(ctx, topology) -> dict | None:
    required = _required_topics(topology)
    internal = [t for t in required if t in KAFKA_INTERNAL_TOPICS]
    if internal:
        return streams_error_response(ErrorCode.STREAMS_INVALID_TOPOLOGY,
                                      f"Use of Kafka internal topics {','.join(internal)} in a Kafka Streams "
                                      f"topology is prohibited.")
    invalid = [t for t in required if topic_name_invalid(t)]
    if invalid:
        return streams_error_response(ErrorCode.STREAMS_INVALID_TOPOLOGY,
                                      f"Topic names {','.join(invalid)} are not valid topic names.")
    if any(not ctx.authorized(DESCRIBE, TOPIC, t) for t in required):
        return streams_error_response(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    return None


def _create_internal_topics(ctx, answer: dict, to_create: dict) -> None:
    if not ctx.cluster_authorized(CREATE, log_denied=False):
        unauthorized = [n for n in to_create if not ctx.authorized(CREATE, TOPIC, n)]
        if unauthorized:
            _add_detail(answer, f"Unauthorized to CREATE on topics {', '.join(unauthorized)}.")
            return
    failed = []
    for topic in to_create.values():
        if topic.name in ctx.broker.metadata.topics:   # (made by an earlier heartbeat, not yet known here)
            continue
        reason = create_on_behalf(ctx, topic.name, topic.partitions, topic.replication_factor, dict(topic.configs))
        if reason:
            ctx.log.warning("streams_internal_topic_not_created", topic=topic.name, reason=reason)
            failed.append(f"{topic.name} ({reason})")
    if failed:
        more = f" and {len(failed) - 3} more" if len(failed) > 3 else ""
        _add_detail(answer, f"Creation failed: {', '.join(failed[:3])}{more}.", append_only=True)


def _add_detail(answer: dict, detail: str, append_only: bool = False) -> None:
    status = answer["status"] if answer["status"] is not None else []
    answer["status"] = status
    for s in status:
        if s["status_code"] == MISSING_INTERNAL_TOPICS:
            s["status_detail"] += "; " + detail
            return
    if not append_only:
        status.append({"status_code": MISSING_INTERNAL_TOPICS, "status_detail": detail})


def handle(ctx, request):
    if features.level(ctx.broker, "streams.version") < 1:
        return streams_error_response(ErrorCode.UNSUPPORTED_VERSION)
    error = coordinator_error(ctx, request.group_id)
    if error == ErrorCode.GROUP_AUTHORIZATION_FAILED:
        return streams_error_response(error)
    if request.topology is not None:
        refusal = _topology_refusal(ctx, request.topology)
        if refusal:
            return refusal
    if error:
        return streams_error_response(error)
    try:
        answer, to_create = ctx.broker.group_coordinator.streams_group_heartbeat(request, ctx.client_id or "",
                                                                                 client_host(ctx))
    except InvalidTopology as e:
        return streams_error_response(ErrorCode.STREAMS_INVALID_TOPOLOGY, str(e))
    if to_create:
        _create_internal_topics(ctx, answer, to_create)
    return when_replicated(ctx, *group_shard(ctx, request.group_id), answer)

"""FindCoordinator: which broker coordinates a group (v4: several keys at once; v6: a share partition's state,
KIP-932, for brokers, with ClusterAction).

The first lookup of a kind creates its internal topic (``__consumer_offsets``
for groups, ``__transaction_state`` for transactional ids, ``__share_group_state`` for share partitions).
"""

import base64

from kbroker.protocol import acls
from kbroker.protocol.acls import DESCRIBE
from kbroker.protocol.error_messages import kafka_message
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.find_coordinator import FIND_COORDINATOR as API  # noqa: F401  (the registry reads API)
from kbroker.storage.config_values import java_int

GROUP, TRANSACTION, SHARE = 0, 1, 2


_JAVA_BLANK = "".join(map(chr, range(33)))   # (what Java's String.trim takes off)


def _share_key(key: str) -> tuple[str, bytes, int] | None:
    """A share partition's key as Kafka's SharePartitionKey reads it (group, then a topic id, then a partition,
    ':'-separated; the group may hold ':'), or None where it refuses the key."""
    tokens = key.split(":")
    while tokens and not tokens[-1]:
        tokens.pop()   # (Java's split drops trailing empty parts)
    if len(tokens) < 3:
        return None
    group = ":".join(tokens[:-2])
    partition = java_int(tokens[-1])
    if not group.strip(_JAVA_BLANK) or partition is None or len(tokens[-2]) > 24:
        return None
    try:
        topic_id = base64.b64decode(tokens[-2].translate(_URL_SAFE) + "=" * (-len(tokens[-2]) % 4), validate=True)
    except ValueError:
        return None
    return (group, topic_id, partition) if len(topic_id) == 16 else None


_URL_SAFE = str.maketrans("-_", "+/")


def _lookup(ctx, key: str, key_type: int) -> dict:
    broker = ctx.broker
    if key_type == GROUP and not ctx.authorized(DESCRIBE, acls.GROUP, key):
        return _error(key, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if key_type == TRANSACTION and not ctx.authorized(DESCRIBE, acls.TRANSACTIONAL_ID, key):
        return _error(key, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    share_key = _share_key(key) if key_type == SHARE else None
    if key_type == SHARE and share_key is None:
        return _error(key, ErrorCode.INVALID_REQUEST)
    if key_type == GROUP:
        error = broker.coordination.ensure_offsets_topic() or broker.coordination.group_coordinator_error(key)
    elif key_type == TRANSACTION:
        error = broker.coordination.ensure_transaction_topic() or broker.coordination.transaction_coordinator_error(key)
    else:
        error = broker.coordination.ensure_share_state_topic() or broker.coordination.share_coordinator_error(
            broker.share_coordinator.partition_for(*share_key))
    if error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
        error = ErrorCode.NONE   # this broker is the coordinator; its requests say when the load is done
    if error == ErrorCode.NOT_COORDINATOR and broker.cluster is not None:
        error, node = _leader_elsewhere(ctx, key, key_type)
        if not error:
            return node
    if error:
        return _error(key, error)
    _, host, port = next((e for e in broker.endpoints if e[0] == ctx.listener), broker.endpoints[0])
    return {"key": key, "node_id": broker.broker_id, "host": host, "port": port, "error_code": 0,
            "error_message": _FOUND}


_FOUND = ""   # (a key's message from v4, as Kafka's: its default, whatever the answer; before v4, the error's words)


def _error(key: str, error: ErrorCode) -> dict:
    # (from v4 Kafka leaves a key's message at its default, "", whatever the error; before, the error's words)
    return {"key": key, "node_id": -1, "host": "", "port": -1, "error_code": error, "error_message": ""}


def _leader_elsewhere(ctx, key: str, key_type: int):
    """In a cluster the coordinator is the leader of the key's internal partition, wherever it is."""
    broker = ctx.broker
    if key_type == GROUP:
        topic, index = "__consumer_offsets", broker.group_coordinator.partition_for(key)
    elif key_type == SHARE:
        topic, index = "__share_group_state", broker.share_coordinator.partition_for(*_share_key(key))
    else:
        topic, index = "__transaction_state", broker.txn_coordinator.partition_for(key)
    found = broker.partition_info(topic, index)
    if found is None or found[0] < 0:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
    for node_id, host, port, _ in broker.live_brokers(ctx.listener):
        if node_id == found[0]:
            return ErrorCode.NONE, {"key": key, "node_id": node_id, "host": host, "port": port, "error_code": 0,
                                    "error_message": _FOUND}
    return ErrorCode.COORDINATOR_NOT_AVAILABLE, None


def handle(ctx, request):
    key_type = request.key_type if ctx.api_version >= 1 else GROUP
    keys = request.coordinator_keys if ctx.api_version >= 4 else [request.key]
    if key_type == SHARE and ctx.api_version < 6:
        found = [_error(key, ErrorCode.INVALID_REQUEST) for key in keys]
    elif key_type not in (GROUP, TRANSACTION, SHARE) or (
            key_type == SHARE and not ctx.cluster_authorized(acls.CLUSTER_ACTION)):
        # (the whole request refused, each key in the error's words, as Kafka's)
        error = ErrorCode.INVALID_REQUEST if key_type != SHARE else ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        found = [{**_error(key, error), "error_message": kafka_message(error)} for key in keys]
    else:
        found = [_lookup(ctx, key, key_type) for key in keys]
    if ctx.api_version >= 4:
        return {"throttle_time_ms": 0, "coordinators": found}
    (found,) = found
    code = found["error_code"]
    return {"throttle_time_ms": 0, "error_code": code, "error_message": kafka_message(code),
            "node_id": found["node_id"], "host": found["host"], "port": found["port"]}

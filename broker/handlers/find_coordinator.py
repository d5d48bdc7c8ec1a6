"""FindCoordinator: which broker coordinates a group (v4: several keys at once; v6: a share partition's state,
KIP-932, for brokers, with ClusterAction).

The first lookup of a kind creates its internal topic (``__consumer_offsets``
for groups, ``__transaction_state`` for transactional ids, ``__share_group_state`` for share partitions).
"""

from kbroker.protocol import acls
from kbroker.protocol.acls import DESCRIBE
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.find_coordinator import FIND_COORDINATOR as API  # noqa: F401  (the registry reads API)

GROUP, TRANSACTION, SHARE = 0, 1, 2


def _lookup(ctx, key: str, key_type: int) -> dict:
    broker = ctx.broker
    if key_type == GROUP and not ctx.authorized(DESCRIBE, acls.GROUP, key):
        return _error(key, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if key_type == TRANSACTION and not ctx.authorized(DESCRIBE, acls.TRANSACTIONAL_ID, key):
        return _error(key, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if key_type == SHARE and (ctx.api_version < 6 or key.count(":") < 2):
        return _error(key, ErrorCode.INVALID_REQUEST)
    if key_type == SHARE and not ctx.cluster_authorized(acls.CLUSTER_ACTION):
        return _error(key, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    if key_type == GROUP:
        error = broker.coordination.ensure_offsets_topic() or broker.coordination.group_coordinator_error(key)
    elif key_type == TRANSACTION:
        error = broker.coordination.ensure_transaction_topic() or broker.coordination.transaction_coordinator_error(key)
    elif key_type == SHARE:
        error = broker.coordination.ensure_share_state_topic() or broker.coordination.share_coordinator_error(
            broker.share_coordinator.partition_for_key(key))
    else:
        error = ErrorCode.INVALID_REQUEST
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


_FOUND = ""   # (the message of a coordinator found, as Kafka's: "" per key from v4, "NONE" before)


def _error(key: str, error: ErrorCode) -> dict:
    return {"key": key, "node_id": -1, "host": "", "port": -1, "error_code": error, "error_message": error.name}


def _leader_elsewhere(ctx, key: str, key_type: int):
    """In a cluster the coordinator is the leader of the key's internal partition, wherever it is."""
    broker = ctx.broker
    if key_type == GROUP:
        topic, index = "__consumer_offsets", broker.group_coordinator.partition_for(key)
    elif key_type == SHARE:
        topic, index = "__share_group_state", broker.share_coordinator.partition_for_key(key)
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
    if ctx.api_version >= 4:
        return {"throttle_time_ms": 0, "coordinators": [_lookup(ctx, key, key_type)
                                                        for key in request.coordinator_keys]}
    found = _lookup(ctx, request.key, key_type)
    message = found["error_message"] if found["error_code"] else "NONE"
    return {"throttle_time_ms": 0, "error_code": found["error_code"], "error_message": message,
            "node_id": found["node_id"], "host": found["host"], "port": found["port"]}

"""ReadShareGroupState (KIP-932): a share partition's state, read by its leader when it loads it; a leader epoch
higher than the stored one is stored (and on the ISR) before the answer, fencing the leaders before it. Refused
as Kafka's share coordinator refuses it, in its order: a negative partition, a state never initialized
(INVALID_REQUEST: the leader then has none to load), an older leader epoch than the stored one (-1 too), a topic
id or partition the cluster does not have."""

from kbroker.broker.handlers.share_state_common import answer_each, negative, refused, unknown
from kbroker.protocol.error_messages import kafka_message
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.share_group_state import READ_SHARE_GROUP_STATE as API  # noqa: F401

UNINITIALIZED = "Read operation on uninitialized share partition not allowed."
NO_STATE = {"state_epoch": 0, "start_offset": 0, "state_batches": []}   # (a refusal's, as Kafka's)


def handle(ctx, request):
    coordinator = ctx.broker.share_coordinator

    def read(key, p) -> dict:
        early = negative(key)
        if early:
            return {**early, **NO_STATE}
        if coordinator.states.get(key) is None:
            return refused(ErrorCode.INVALID_REQUEST, UNINITIALIZED, **NO_STATE)
        error = coordinator.read_refusal(key, p.leader_epoch)
        if error:
            return refused(error, kafka_message(error), **NO_STATE)
        late = unknown(ctx.broker, key)
        if late:
            return {**late, **NO_STATE}
        error, state = coordinator.read(key, p.leader_epoch)
        if error:
            return refused(error, None, **NO_STATE)
        return {"error_code": 0, "error_message": None, "state_epoch": state.state_epoch,
                "start_offset": state.start_offset,
                "state_batches": [{"first_offset": f, "last_offset": la, "delivery_state": s, "delivery_count": c}
                                  for f, la, s, c in state.batches]}
    return answer_each(ctx, request, read, replicate=True)   # (a higher leader epoch was stored)

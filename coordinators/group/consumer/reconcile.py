"""One member's next step towards its target assignment (KIP-848's reconciliation).

A member revokes before anyone else is given what it held: partitions leaving it go to its
pending-revocation set and it stays at its epoch (UNREVOKED_PARTITIONS) until a heartbeat no longer lists
them as owned; only then does it move on towards the target (to its epoch, or back to revoking at the
same epoch if the target took more from it meanwhile). A partition of its target still held by another
member (assigned or pending revocation there) is withheld (UNRELEASED_PARTITIONS) and given at a later
heartbeat, once released.
"""

from __future__ import annotations

from kbroker.coordinators.group.consumer.model import Assignment, ConsumerMember, MemberState


def owns_any(owned: Assignment | None, partitions: Assignment) -> bool:
    """Whether the member's reported partitions include any of ``partitions`` (None: it did not say)."""
    if owned is None:
        return True
    return any(owned.get(t, frozenset()) & ps for t, ps in partitions.items())


def next_member(member: ConsumerMember, target_epoch: int, target: Assignment, owner_of,
                owned: Assignment | None, subscribed: frozenset[bytes] | None = None,
                subscription_changed: bool = False) -> ConsumerMember:
    """``owner_of(topic_id, partition)`` names the member holding a partition now, or None. ``subscribed``: the
    topic ids the member subscribes to now (None: every topic of its target); a partition of any other topic
    is not kept, whatever the target says. ``subscription_changed``: this heartbeat changed the member's
    subscription, so partitions of topics it left are taken from it at once, even at its target's epoch or
    while it still revokes others (as Kafka 4.2)."""
    if member.state is MemberState.STABLE:
        waits = member.member_epoch == target_epoch   # (reconciled already)
    else:   # (one still revoking waits until it no longer reports what it gives up; one withheld never waits)
        waits = member.state is MemberState.UNREVOKED_PARTITIONS and owns_any(owned, member.pending_revocation)
    if waits:
        return _leave_unsubscribed(member, owned, subscribed) if subscription_changed else member
    return _compute(member, target_epoch, target, owner_of, owned, subscribed)


def _leave_unsubscribed(member: ConsumerMember, owned: Assignment | None,
                        subscribed: frozenset[bytes] | None) -> ConsumerMember:
    """The member's partitions of topics it no longer subscribes to move to its pending revocation, without a
    new epoch (Kafka's quick path for a changed subscription; the full step comes with the next target)."""
    if subscribed is None:
        return member
    leaving = {t: ps for t, ps in member.assigned.items() if t not in subscribed}
    if not leaving:
        return member
    assigned = {t: ps for t, ps in member.assigned.items() if t in subscribed}
    revoking = dict(member.pending_revocation)
    for topic_id, partitions in leaving.items():
        revoking[topic_id] = revoking.get(topic_id, frozenset()) | partitions
    if owns_any(owned, revoking):
        return member.with_(state=MemberState.UNREVOKED_PARTITIONS, assigned=assigned, pending_revocation=revoking)
    return member.with_(assigned=assigned)


def _compute(member: ConsumerMember, target_epoch: int, target: Assignment, owner_of,
             owned: Assignment | None, subscribed: frozenset[bytes] | None = None) -> ConsumerMember:
    """The member's next step: revoking at its own epoch if it still holds what the target took, else at the
    target's epoch with what it may have now."""
    assigned: dict[bytes, frozenset[int]] = {}
    revoking: dict[bytes, frozenset[int]] = {}
    to_assign: dict[bytes, frozenset[int]] = {}
    unreleased = False
    for topic_id in set(target) | set(member.assigned):
        wanted = target.get(topic_id, frozenset()) if subscribed is None or topic_id in subscribed else frozenset()
        current = member.assigned.get(topic_id, frozenset())
        keep = current & wanted
        revoke = current - keep
        new = set(wanted - keep)
        held = {p for p in new if owner_of(topic_id, p) not in (None, member.member_id)}
        if held:
            unreleased = True
            new -= held
        if keep:
            assigned[topic_id] = keep
        if revoke:
            revoking[topic_id] = revoke
        if new:
            to_assign[topic_id] = frozenset(new)
    if revoking and owns_any(owned, revoking):
        return member.with_(state=MemberState.UNREVOKED_PARTITIONS, previous_member_epoch=member.member_epoch,
                            assigned=assigned, pending_revocation=revoking)
    for topic_id, partitions in to_assign.items():
        assigned[topic_id] = assigned.get(topic_id, frozenset()) | partitions
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return member.with_(state=state, member_epoch=target_epoch,
                        previous_member_epoch=member.member_epoch,
                        assigned=assigned, pending_revocation={})

"""One streams member's next step towards its target assignment (KIP-1071's reconciliation).

As for consumer groups, a member first gives up what its target no longer holds (UNREVOKED_TASKS, at its
epoch, until a heartbeat no longer reports those tasks as owned), then moves to the target's epoch with what it
may have now. A task is withheld (UNRELEASED_TASKS) while another member still holds it: an active task while
any member holds it actively or while the member's own process holds it as a standby or warm-up; a standby or
warm-up task while the member's own process holds it in any role. Active tasks remember the epoch they were
given at.
"""

from __future__ import annotations

from kbroker.coordinators.group.streams.model import MemberState, StreamsGroup, StreamsMember, Target, Tasks


def _owns_any(owned: tuple[Tasks, Tasks, Tasks] | None, revoking: tuple[Tasks, Tasks, Tasks]) -> bool:
    if owned is None:
        return True
    return any(mine.get(s, frozenset()) & ps for mine, theirs in zip(owned, revoking) for s, ps in theirs.items())


def next_member(group: StreamsGroup, member: StreamsMember, target_epoch: int, target: Target,
                owned: tuple[Tasks, Tasks, Tasks] | None) -> StreamsMember:
    """``owned``: the (active, standby, warm-up) tasks the member reported, None if it did not say."""
    if member.state is MemberState.STABLE:
        if member.member_epoch == target_epoch:
            return member
        return _compute(group, member, member.member_epoch, target_epoch, target, owned)
    if member.state is MemberState.UNREVOKED_TASKS:
        if _owns_any(owned, member.revoking()):
            return member
        return _compute(group, member, member.member_epoch + 1, target_epoch, target, owned)
    return _compute(group, member, member.member_epoch, target_epoch, target, owned)


def _compute(group: StreamsGroup, member: StreamsMember, epoch: int, target_epoch: int, target: Target,
             owned) -> StreamsMember:
    process = member.process_id
    unreleased = False
    active_holder, standby_holders, warmup_holders = group.task_holders()

    def in_process_otherwise(task) -> bool:
        return process in standby_holders.get(task, ()) or process in warmup_holders.get(task, ())

    def withheld_active(s, p):
        return active_holder.get((s, p)) is not None or in_process_otherwise((s, p))

    def withheld_other(s, p):
        return active_holder.get((s, p)) == process or in_process_otherwise((s, p))

    active, active_revoking, active_new = {}, {}, {}
    for s in set(target.active) | set(member.active):
        wanted = target.active.get(s, frozenset())
        current = member.active.get(s, {})
        keep = {p: e for p, e in current.items() if p in wanted}
        gone = {p: e for p, e in current.items() if p not in wanted}
        new = {p: target_epoch for p in wanted if p not in keep}
        held = {p for p in new if withheld_active(s, p)}
        unreleased |= bool(held)
        new = {p: e for p, e in new.items() if p not in held}
        for out, part in ((active, keep), (active_revoking, gone), (active_new, new)):
            if part:
                out[s] = part
    others = []
    for wanted_all, current_all in ((target.standby, member.standby), (target.warmup, member.warmup)):
        keep_all, gone_all, new_all = {}, {}, {}
        for s in set(wanted_all) | set(current_all):
            wanted, current = wanted_all.get(s, frozenset()), current_all.get(s, frozenset())
            keep, gone = current & wanted, current - wanted
            new = {p for p in wanted - keep if not withheld_other(s, p)}
            unreleased |= bool((wanted - keep) - new)
            for out, part in ((keep_all, keep), (gone_all, gone), (new_all, new)):
                if part:
                    out[s] = frozenset(part)
        others.append((keep_all, gone_all, new_all))
    (standby, standby_gone, standby_new), (warmup, warmup_gone, warmup_new) = others
    revoking = ({s: frozenset(ps) for s, ps in active_revoking.items()}, standby_gone, warmup_gone)
    if any(revoking) and _owns_any(owned, revoking):
        return member.with_(state=MemberState.UNREVOKED_TASKS, member_epoch=epoch,
                            previous_member_epoch=member.member_epoch, active=active, standby=standby,
                            warmup=warmup, active_revoking=active_revoking, standby_revoking=standby_gone,
                            warmup_revoking=warmup_gone)
    for s, ps in active_new.items():
        active[s] = {**active.get(s, {}), **ps}
    for mine, new in ((standby, standby_new), (warmup, warmup_new)):
        for s, ps in new.items():
            mine[s] = mine.get(s, frozenset()) | ps
    state = MemberState.UNRELEASED_TASKS if unreleased else MemberState.STABLE
    return member.with_(state=state, member_epoch=target_epoch, previous_member_epoch=member.member_epoch,
                        active=active, standby=standby, warmup=warmup, active_revoking={}, standby_revoking={},
                        warmup_revoking={})

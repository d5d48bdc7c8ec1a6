"""What the broker does when one of its log dirs fails (Kafka's JBOD: ReplicaManager.handleLogDirFailure).

An I/O error on a log dir takes the whole dir offline (``LogManager.report``);
its partitions already answer KAFKA_STORAGE_ERROR when this runs. Here the
rest of the broker lets go of them: moves into or out of the dir stop,
follower fetching stops, coordinators unload what they served from there, and
in a cluster the controller is told through
``/log_dir_event_notification``, so that it moves leadership to replicas on
other brokers. The broker keeps serving every partition in its other dirs;
with no dir left online it stops, as Kafka halts.
"""

from __future__ import annotations

import asyncio

import structlog

log = structlog.get_logger("broker.log_dir_failure")


def handle_log_dir_failure(broker, log_dir: str, lost: list[tuple[str, int]]) -> None:
    mover = broker.alter_log_dirs
    for tp, future in list(mover.futures.items()):
        if tp in lost or future.parent_dir == log_dir:
            mover.cancel(tp)
    for tp in lost:
        broker.coordination.leadership_changed(tp[0], tp[1], False)
    member = broker.cluster
    if member is not None:
        for tp in lost:
            member.fetchers.unfollow(tp)
        member.spawn(member.zk_call(member.zk.propagate_log_dir_event, broker.broker_id))
    if not broker.log_manager.online_dirs:
        log.critical("all_log_dirs_failed", log_dirs=broker.log_manager.log_dirs)
        broker.halted = True
        asyncio.ensure_future(broker.stop())

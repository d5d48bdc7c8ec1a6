"""AlterReplicaLogDirs: move this broker's replicas between its ``log.dirs`` (needs Alter on the cluster).

Per partition, as Kafka 4 answers: NONE when the move started or the replica is
already there; when this broker has no replica yet, UNKNOWN_TOPIC_OR_PARTITION
(NOT_LEADER_OR_FOLLOWER where the cluster has the partition elsewhere), the dir
remembered and the replica created there when it arrives; LOG_DIR_NOT_FOUND for
a path that is not one of ``log.dirs``; KAFKA_STORAGE_ERROR when the dir or the
replica's current dir has failed. A partition named twice is answered once, for
the dir named last (Kafka reads the request into a map by partition).
"""

import os

from kbroker.protocol.acls import ALTER
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.alter_replica_log_dirs import ALTER_REPLICA_LOG_DIRS as API  # noqa: F401  (the registry reads API)


def handle(ctx, request):
    authorized = ctx.cluster_authorized(ALTER)
    wanted: dict[tuple[str, int], str] = {}
    for d in request.dirs:
        path = os.path.abspath(d.path) if d.path else d.path
        for topic in d.topics:
            for index in topic.partitions:
                wanted[(topic.name, index)] = path
    results: dict[str, list] = {}
    for (topic, index), path in wanted.items():
        if not authorized:
            error = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        else:
            error = ctx.broker.alter_log_dirs.alter((topic, index), path)
            ctx.log.info("replica_log_dir_altered", topic=topic, partition=index, log_dir=path, error=error.name)
        results.setdefault(topic, []).append({"partition_index": index, "error_code": error})
    return {"throttle_time_ms": 0,
            "results": [{"topic_name": t, "partitions": ps} for t, ps in results.items()]}

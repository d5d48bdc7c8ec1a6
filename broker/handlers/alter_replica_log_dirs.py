"""AlterReplicaLogDirs: move this broker's replicas between its ``log.dirs`` (needs Alter on the cluster).

Per partition, as Kafka answers: NONE when the move started or the replica is
already there; REPLICA_NOT_AVAILABLE when this broker has no replica yet (the
dir is remembered and the replica is created there when it arrives);
LOG_DIR_NOT_FOUND for a path that is not one of ``log.dirs``;
KAFKA_STORAGE_ERROR when the dir or the replica's current dir has failed.
"""

import os

from kbroker.protocol.acls import ALTER
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.alter_replica_log_dirs import ALTER_REPLICA_LOG_DIRS as API  # noqa: F401  (the registry reads API)


def handle(ctx, request):
    authorized = ctx.cluster_authorized(ALTER)
    results: dict[str, list] = {}
    for d in request.dirs:
        path = os.path.abspath(d.path) if d.path else d.path
        for topic in d.topics:
            for index in topic.partitions:
                if not authorized:
                    error = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
                else:
                    error = ctx.broker.alter_log_dirs.alter((topic.name, index), path)
                    ctx.log.info("replica_log_dir_altered", topic=topic.name, partition=index, log_dir=path,
                                 error=error.name)
                results.setdefault(topic.name, []).append({"partition_index": index, "error_code": error})
    return {"throttle_time_ms": 0,
            "results": [{"topic_name": t, "partitions": ps} for t, ps in results.items()]}

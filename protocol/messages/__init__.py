"""Every API declaration; importing this package registers them all."""

from protocol.messages import (  # noqa: F401  (imported for registration)
    alter_configs,
    api_versions,
    create_partitions,
    create_topics,
    delete_topics,
    describe_cluster,
    describe_configs,
    fetch,
    incremental_alter_configs,
    init_producer_id,
    list_offsets,
    metadata,
    produce,
)

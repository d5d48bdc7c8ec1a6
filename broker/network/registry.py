"""The handler registry: api key -> handler module and its version range.

The same table dispatches requests and builds the ApiVersions response, so
what is advertised is exactly what is implemented. A handler module declares
``API`` (its schema declaration; the version range comes from it) and
``handle(ctx, request)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Callable

from kbroker.broker.handlers import (
    create_delegation_token,
    describe_delegation_token,
    expire_delegation_token,
    renew_delegation_token,
    alter_partition_reassignments,
    get_telemetry_subscriptions,
    push_telemetry,
    update_features,
    alter_share_group_offsets,
    consumer_group_describe,
    consumer_group_heartbeat,
    delete_share_group_offsets,
    delete_share_group_state,
    describe_share_group_offsets,
    initialize_share_group_state,
    read_share_group_state_summary,
    read_share_group_state,
    share_acknowledge,
    share_fetch,
    share_group_describe,
    share_group_heartbeat,
    streams_group_describe,
    streams_group_heartbeat,
    write_share_group_state,
    alter_replica_log_dirs,
    list_partition_reassignments,
    describe_topic_partitions,
    describe_log_dirs,
    delete_records,
    alter_client_quotas,
    describe_client_quotas,
    create_acls,
    delete_acls,
    describe_acls,
    alter_user_scram_credentials,
    describe_user_scram_credentials,
    sasl_authenticate,
    sasl_handshake,
    elect_leaders,
    offset_for_leader_epoch,
    controlled_shutdown,
    allocate_producer_ids,
    alter_partition,
    stop_replica,
    update_metadata,
    leader_and_isr,
    add_offsets_to_txn,
    add_partitions_to_txn,
    alter_configs,
    api_versions,
    create_partitions,
    create_topics,
    delete_groups,
    delete_topics,
    describe_cluster,
    describe_configs,
    describe_groups,
    describe_producers,
    describe_transactions,
    end_txn,
    fetch,
    find_coordinator,
    heartbeat,
    incremental_alter_configs,
    init_producer_id,
    join_group,
    leave_group,
    list_config_resources,
    list_groups,
    list_offsets,
    list_transactions,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    produce,
    sync_group,
    txn_offset_commit,
    write_txn_markers,
)


@dataclass(frozen=True)
class Handler:
    api_key: int
    name: str
    min_version: int
    max_version: int
    handle: Callable

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


def _handler(module: ModuleType) -> Handler:
    declared = module.API
    return Handler(declared.key, declared.name, declared.versions.low, declared.versions.high, module.handle)


HANDLERS: dict[int, Handler] = {
    h.api_key: h for h in map(_handler, [
        produce, fetch, list_offsets, metadata, api_versions, create_topics, delete_topics, init_producer_id,
        describe_configs, alter_configs, create_partitions, incremental_alter_configs, describe_cluster,
        find_coordinator, join_group, sync_group, heartbeat, leave_group, offset_commit, offset_fetch,
        describe_groups, list_groups, delete_groups, offset_delete, list_config_resources,
        consumer_group_heartbeat, consumer_group_describe, streams_group_heartbeat, streams_group_describe,
        share_group_heartbeat, share_group_describe, share_fetch, share_acknowledge,
        initialize_share_group_state, read_share_group_state, write_share_group_state, delete_share_group_state,
        read_share_group_state_summary, describe_share_group_offsets, alter_share_group_offsets,
        delete_share_group_offsets,
        add_partitions_to_txn, add_offsets_to_txn, end_txn, write_txn_markers, txn_offset_commit,
        describe_producers, describe_transactions, list_transactions,
        leader_and_isr, update_metadata, stop_replica, alter_partition, controlled_shutdown, allocate_producer_ids,
        offset_for_leader_epoch, elect_leaders,
        sasl_handshake, sasl_authenticate, describe_user_scram_credentials, alter_user_scram_credentials,
        describe_acls, create_acls, delete_acls, describe_client_quotas, alter_client_quotas, delete_records,
        describe_log_dirs, alter_replica_log_dirs,
        describe_topic_partitions, alter_partition_reassignments, list_partition_reassignments,
        get_telemetry_subscriptions, push_telemetry, update_features,
        create_delegation_token, renew_delegation_token, expire_delegation_token, describe_delegation_token,
    ])
}


def api_versions_list() -> list[dict]:
    return [{"api_key": h.api_key, "min_version": h.min_version, "max_version": h.max_version}
            for h in sorted(HANDLERS.values(), key=lambda h: h.api_key)]

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

from broker.handlers import (
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
    ])
}


def api_versions_list() -> list[dict]:
    return [{"api_key": h.api_key, "min_version": h.min_version, "max_version": h.max_version}
            for h in sorted(HANDLERS.values(), key=lambda h: h.api_key)]

"""Dicts keyed by (topic, partition) that know each topic's keys (``ByPartition``: the replica manager's
partitions, the log manager's logs), and the lists of logs that the log manager's periodic passes walk (``Logs``).

The passes run every second (flush by time) or every ``log.cleaner.backoff.ms`` (compaction) and look at few
logs (those with a finite ``flush.ms``, the compacted ones); a walk of every log each time was most of an idle
broker's CPU at 50,000 partitions. Invariant: a list ``where`` returns holds exactly the logs passing its test
as they are now, for it is listed again whenever a log comes or goes (``version``) or any log's config is
assigned (``Log.config_changes``).
"""

from __future__ import annotations

from kbroker.storage.log import Log


class ByPartition(dict):
    """A dict keyed by (topic, partition) that counts its changes (``version``) and knows each topic's keys
    (``of_topic``: a topic's partitions without a walk of every partition). Reads are a plain dict's."""
    version = 0

    def __init__(self) -> None:
        super().__init__()
        self._topics: dict[str, set[int]] = {}

    def of_topic(self, topic: str) -> list[tuple[str, int]]:
        return [(topic, index) for index in sorted(self._topics.get(topic, ()))]

    def _forget(self, key) -> None:
        indexes = self._topics.get(key[0])
        if indexes is not None:
            indexes.discard(key[1])
            if not indexes:
                del self._topics[key[0]]

    def __setitem__(self, key, value) -> None:
        self.version += 1
        super().__setitem__(key, value)
        self._topics.setdefault(key[0], set()).add(key[1])

    def __delitem__(self, key) -> None:
        self.version += 1
        super().__delitem__(key)
        self._forget(key)

    def pop(self, key, *default):
        self.version += 1
        if key in self:
            self._forget(key)
        return super().pop(key, *default)

    def popitem(self):
        self.version += 1
        key, value = super().popitem()
        self._forget(key)
        return key, value

    def setdefault(self, key, default=None):
        if key not in self:
            self[key] = default
        return self[key]

    def update(self, *args, **kwargs) -> None:
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def clear(self) -> None:
        self.version += 1
        super().clear()
        self._topics.clear()


class Logs(ByPartition):
    def __init__(self) -> None:
        super().__init__()
        self._listed: dict[str, tuple[tuple[int, int], list]] = {}

    def where(self, name: str, test) -> list[tuple[tuple[str, int], Log]]:
        """(partition, log) of the logs passing ``test`` (a test of a log's config), kept under ``name``."""
        stamp = (self.version, Log.config_changes)
        listed = self._listed.get(name)
        if listed is None or listed[0] != stamp:
            listed = self._listed[name] = (stamp, [(tp, lg) for tp, lg in self.items() if test(lg)])
        return listed[1]

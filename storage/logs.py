"""Dicts keyed by (topic, partition) that know each topic's keys (``ByPartition``: the replica manager's
partitions, the log manager's logs), and the lists of logs that the log manager's periodic passes walk (``Logs``).

The passes run every second (flush by time) or every ``log.cleaner.backoff.ms`` (compaction) and look at few
logs (those with a finite ``flush.ms``, the compacted ones); a walk of every log each time was most of an idle
broker's CPU at 50,000 partitions. Invariant: a list ``where`` returns holds exactly the logs passing its test
as they are now: a log put in is tested, one taken out leaves every list, and any assignment of a log's config
(``Log.config_changes``) has the lists made anew.
"""

from __future__ import annotations

from kbroker.storage.log import Log


class WatchedDict(dict):
    """A dict that tells its subclass of every key put (``_added``) and taken out (``_removed``), through every
    way of changing it. Reads are a plain dict's."""

    def _added(self, key, value) -> None:
        pass

    def _removed(self, key) -> None:
        pass

    def __setitem__(self, key, value) -> None:
        super().__setitem__(key, value)
        self._added(key, value)

    def __delitem__(self, key) -> None:
        super().__delitem__(key)
        self._removed(key)

    def pop(self, key, *default):
        if key in self:
            value = super().pop(key)
            self._removed(key)
            return value
        return super().pop(key, *default)

    def popitem(self):
        key, value = super().popitem()
        self._removed(key)
        return key, value

    def setdefault(self, key, default=None):
        if key not in self:
            self[key] = default
        return self[key]

    def update(self, *args, **kwargs) -> None:
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def clear(self) -> None:
        for key in list(self):
            del self[key]


class ByPartition(WatchedDict):
    """Keyed by (topic, partition), knowing each topic's keys (``of_topic``: a topic's partitions without a walk
    of every partition)."""

    def __init__(self) -> None:
        super().__init__()
        self._topics: dict[str, set[int]] = {}

    def of_topic(self, topic: str) -> list[tuple[str, int]]:
        return [(topic, index) for index in sorted(self._topics.get(topic, ()))]

    def _added(self, key, value) -> None:
        self._topics.setdefault(key[0], set()).add(key[1])

    def _removed(self, key) -> None:
        indexes = self._topics.get(key[0])
        if indexes is not None:
            indexes.discard(key[1])
            if not indexes:
                del self._topics[key[0]]


class Logs(ByPartition):
    """The log manager's logs, with the lists its passes walk kept as logs come and go (a log passing a list's
    test joins it), made anew only when some log's config is assigned."""

    def __init__(self) -> None:
        super().__init__()
        self._listed: dict[str, list] = {}   # name -> [config changes seen, test, {partition: log}]

    def where(self, name: str, test) -> list[tuple[tuple[str, int], Log]]:
        """(partition, log) of the logs passing ``test`` (a test of a log's config), kept under ``name``."""
        listed = self._listed.get(name)
        if listed is None or listed[0] != Log.config_changes:
            listed = self._listed[name] = [Log.config_changes, test,
                                           {tp: lg for tp, lg in self.items() if test(lg)}]
        return list(listed[2].items())

    def _added(self, key, value) -> None:
        super()._added(key, value)
        for _, test, members in self._listed.values():
            if test(value):
                members[key] = value
            else:
                members.pop(key, None)

    def _removed(self, key) -> None:
        super()._removed(key)
        for _, _, members in self._listed.values():
            members.pop(key, None)

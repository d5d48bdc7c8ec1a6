"""The partitions' logs by (topic, partition), and the lists of them that the log manager's periodic passes walk.

The passes run every second (flush by time) or every ``log.cleaner.backoff.ms`` (compaction) and look at few
logs (those with a finite ``flush.ms``, the compacted ones); a walk of every log each time was most of an idle
broker's CPU at 50,000 partitions. Invariant: a list ``where`` returns holds exactly the logs passing its test
as they are now, for it is listed again whenever a log comes or goes (``version``) or any log's config is
assigned (``Log.config_changes``).
"""

from __future__ import annotations

from kbroker.storage.log import Log


class Logs(dict):
    version = 0   # (moves at every change of which logs there are)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._listed: dict[str, tuple[tuple[int, int], list]] = {}

    def where(self, name: str, test) -> list[tuple[tuple[str, int], Log]]:
        """(partition, log) of the logs passing ``test`` (a test of a log's config), kept under ``name``."""
        stamp = (self.version, Log.config_changes)
        listed = self._listed.get(name)
        if listed is None or listed[0] != stamp:
            listed = self._listed[name] = (stamp, [(tp, lg) for tp, lg in self.items() if test(lg)])
        return listed[1]

    def __setitem__(self, key, value) -> None:
        self.version += 1
        super().__setitem__(key, value)

    def __delitem__(self, key) -> None:
        self.version += 1
        super().__delitem__(key)

    def pop(self, *args):
        self.version += 1
        return super().pop(*args)

    def popitem(self):
        self.version += 1
        return super().popitem()

    def setdefault(self, key, default=None):
        self.version += 1
        return super().setdefault(key, default)

    def update(self, *args, **kwargs) -> None:
        self.version += 1
        super().update(*args, **kwargs)

    def clear(self) -> None:
        self.version += 1
        super().clear()

"""ProducerIdManager: hands out producer ids that are never reissued, even across restarts.

Ids come in blocks; the end of the current block is persisted atomically
before any id of it is handed out, so after a crash the next block starts past
every id that may have been given away.
"""

from __future__ import annotations

import os

from kbroker.storage.checkpoint import write_atomically

BLOCK_SIZE = 1000
FILE_NAME = "producer-id-block"


class ProducerIdManager:
    def __init__(self, directory: str, block_size: int = BLOCK_SIZE) -> None:
        self.path = os.path.join(directory, FILE_NAME)
        self.block_size = block_size
        self.next_id = self._persisted_end()
        self.block_end = self.next_id

    def _persisted_end(self) -> int:
        try:
            with open(self.path, encoding="utf-8") as f:
                return int(f.read().strip() or 0)
        except FileNotFoundError:
            return 0

    def generate(self) -> int:
        if self.next_id >= self.block_end:
            self.block_end = self.next_id + self.block_size
            write_atomically(self.path, str(self.block_end).encode())
        producer_id = self.next_id
        self.next_id += 1
        return producer_id

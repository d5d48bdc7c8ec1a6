"""ControllerChannel: the controller's requests to each broker, one ordered queue per broker.

Requests to one broker leave in the order they were queued (a LeaderAndIsr
must not overtake the one before it); a broker that cannot be reached is
retried until it leaves the live set, when its queue is dropped.
"""

from __future__ import annotations

import asyncio

import structlog

from kbroker.client.connection import ConnectionClosed, KafkaConnection, NoCommonVersion
from kbroker.client.tasks import cancel_and_wait

log = structlog.get_logger("broker.cluster.channel")


class _BrokerQueue:
    def __init__(self, broker_id: int, host: str, port: int, client_id: str, connect_options: dict) -> None:
        self.broker_id = broker_id
        self.connect_options = connect_options
        self.address = (host, port)
        self.client_id = client_id
        self.queue: asyncio.Queue = asyncio.Queue()
        self.last: asyncio.Future | None = None   # the answer to the request queued last (they leave in order)
        self.conn: KafkaConnection | None = None
        self.warned: set[int] = set()   # (APIs the broker serves at no version kbroker writes, warned of once)
        self.task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        delay = 0.05
        while True:
            api_key, version, body, done = await self.queue.get()
            while True:
                try:
                    if self.conn is None or self.conn.closed:
                        self.conn = await KafkaConnection.open(*self.address, client_id=self.client_id, timeout=5,
                                                               negotiate=True, **self.connect_options)
                    response = await self.conn.request(api_key, self._version(api_key, version), body, timeout=30)
                    if done is not None and not done.done():
                        done.set_result(response)
                    delay = 0.05
                    break
                except (ConnectionClosed, ConnectionError, OSError, asyncio.TimeoutError) as exc:
                    log.debug("controller_request_retry", broker=self.broker_id, api_key=api_key, error=str(exc))
                    if self.conn is not None:
                        await self.conn.close()
                    self.conn = None
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 1.0)

    def _version(self, api_key: int, highest: int) -> int:
        """The version to send at: Kafka's controller sends what its ``inter.broker.protocol.version`` allows,
        and an older broker of a mixed cluster (Kafka 2.8-3.3 serves LeaderAndIsr up to v5-6, UpdateMetadata up
        to v7) closes the connection on a newer one. The fields those versions lack (IsKRaftController, topic
        ids in UpdateMetadata before v7) mean nothing to it. A broker that serves none kbroker writes is warned
        of once and retried, as a broker that cannot be reached is."""
        try:
            return self.conn.usable(api_key, highest)
        except NoCommonVersion:
            if api_key not in self.warned:
                self.warned.add(api_key)
                log.warning("controller_request_unsupported", broker=self.broker_id, api_key=api_key,
                            served=self.conn.peer_versions.get(api_key))
            raise

    async def close(self) -> None:
        if not await cancel_and_wait(self.task):
            log.warning("controller_queue_stop_timed_out", broker=self.broker_id)
        if self.conn is not None:
            await self.conn.close()


class ControllerChannel:
    def __init__(self, client_id: str, connect_options: dict | None = None) -> None:
        """``connect_options``: ``KafkaConnection.open``'s security arguments for brokers' inter-broker
        listener (its TLS context and SASL credentials)."""
        self.connect_options = connect_options or {}
        self.client_id = client_id
        self.queues: dict[int, _BrokerQueue] = {}

    def add_broker(self, broker_id: int, host: str, port: int) -> None:
        existing = self.queues.get(broker_id)
        if existing is not None and existing.address == (host, port):
            return
        if existing is not None:
            asyncio.ensure_future(existing.close())
        self.queues[broker_id] = _BrokerQueue(broker_id, host, port, self.client_id, self.connect_options)

    def remove_broker(self, broker_id: int) -> None:
        queue = self.queues.pop(broker_id, None)
        if queue is not None:
            asyncio.ensure_future(queue.close())

    def send(self, broker_id: int, api_key: int, version: int, body: dict) -> asyncio.Future | None:
        queue = self.queues.get(broker_id)
        if queue is None:
            return None
        done = queue.last = asyncio.get_running_loop().create_future()
        queue.queue.put_nowait((api_key, version, body, done))
        return done

    async def flushed(self, timeout_s: float) -> bool:
        """Wait until every broker has answered what was queued for it so far (a broker that cannot be
        reached is waited on until ``timeout_s``); whether all did. A controller that is about to stop calls
        it, as its queues die with it: what it told the other brokers last (the leaderships its own controlled
        shutdown moved) would otherwise reach them only from the next controller, and clients meanwhile
        be sent to a broker that has gone."""
        pending = [q.last for q in self.queues.values() if q.last is not None and not q.last.done()]
        if not pending:
            return True
        _, late = await asyncio.wait(pending, timeout=timeout_s)
        return not late

    async def close(self) -> None:
        for broker_id in list(self.queues):
            queue = self.queues.pop(broker_id)
            await queue.close()

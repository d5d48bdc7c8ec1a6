"""A TCP proxy that drops some broker responses (never requests), to force client retries.

It reads the client's request frames to learn each correlation id's api key,
and when a chosen response comes back it discards it and closes the client's
connection, as a network failure would after the broker has already acted.
With ``drop_every=0`` it drops nothing and records real clients' request
frames, which the fuzzing test mutates and replays.
"""

from __future__ import annotations

import asyncio
import struct
import threading


class DroppingProxy:
    def __init__(self, upstream_port: int, api_key: int = 0, drop_every: int = 4) -> None:
        """``drop_every=0`` drops nothing: the proxy then only records each connection's request frames
        in ``sessions`` (size prefix included), for replaying."""
        self.upstream_port = upstream_port
        self.api_key = api_key
        self.drop_every = drop_every
        self.sessions: list[list[bytes]] = []
        self.seen = 0
        self.dropped = 0
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> "DroppingProxy":
        self._thread.start()
        self._ready.wait(10)
        return self

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()

    async def _handle(self, client_reader, client_writer) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            client_writer.close()
            return
        api_of: dict[int, int] = {}
        recorded: list[bytes] = []
        self.sessions.append(recorded)

        async def requests() -> None:
            while True:
                head = await client_reader.readexactly(4)
                frame = await client_reader.readexactly(struct.unpack(">i", head)[0])
                recorded.append(head + frame)
                api_key, _, correlation = struct.unpack_from(">hhi", frame)
                api_of[correlation] = api_key
                up_writer.write(head + frame)
                await up_writer.drain()

        async def responses() -> None:
            while True:
                head = await up_reader.readexactly(4)
                frame = await up_reader.readexactly(struct.unpack(">i", head)[0])
                (correlation,) = struct.unpack_from(">i", frame)
                if api_of.pop(correlation, None) == self.api_key and self.drop_every:
                    self.seen += 1
                    if self.seen % self.drop_every == 0:
                        self.dropped += 1
                        return  # the broker acted; the client never hears of it
                client_writer.write(head + frame)
                await client_writer.drain()

        tasks = [asyncio.ensure_future(requests()), asyncio.ensure_future(responses())]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in tasks:
                t.cancel()
            client_writer.close()
            up_writer.close()

    async def _shutdown(self) -> None:
        self._server.close()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._loop.stop()

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop)
        self._thread.join(10)
        self._loop.close()

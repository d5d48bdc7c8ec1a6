"""KafkaConnection: one asyncio connection to a broker, requests matched to responses by correlation id.

Requests may be pipelined; responses are read by one task and handed to the
waiting callers. Encoding and decoding are the broker's own schemas
(``protocol``), so the client and broker can never disagree on a shape.
"""

from __future__ import annotations

import asyncio
import io
import itertools
import struct

from protocol import schema
from protocol.framing import FrameStream, open_frame_stream
from protocol.headers import RequestHeader, decode_response_header, encode_request_header
from protocol.types import BufferReader

_SIZE = struct.Struct(">i")


class ConnectionClosed(ConnectionError):
    pass


class KafkaConnection:
    def __init__(self, stream: FrameStream, client_id: str) -> None:
        self.stream = stream
        self.client_id = client_id
        self._correlation = itertools.count(1)
        self._pending: dict[int, tuple[asyncio.Future, int, int]] = {}
        self._reader_task = asyncio.create_task(self._read_loop())

    @classmethod
    async def open(cls, host: str, port: int, client_id: str = "kbroker-client",
                   timeout: float = 10.0, ssl=None) -> "KafkaConnection":
        """``ssl``: an ``ssl.SSLContext`` for a TLS listener."""
        stream = await asyncio.wait_for(open_frame_stream(host, port, ssl=ssl), timeout)
        return cls(stream, client_id)

    async def request(self, api_key: int, version: int, body: dict, *, expect_response: bool = True,
                      timeout: float = 30.0) -> schema.Message | None:
        declared = schema.REGISTRY[api_key]
        flexible = declared.is_flexible(version)
        correlation_id = next(self._correlation)
        out = io.BytesIO()
        out.write(b"\0\0\0\0")
        out.write(encode_request_header(RequestHeader(api_key, version, correlation_id, self.client_id), flexible))
        schema.encode(schema.struct_for(api_key, version, True), body, out)
        frame = out.getbuffer()
        _SIZE.pack_into(frame, 0, len(frame) - 4)
        future = None
        if expect_response:
            future = asyncio.get_running_loop().create_future()
            self._pending[correlation_id] = (future, api_key, version)
        self.stream.write(bytes(frame))
        del frame
        await self.stream.drain()
        if future is None:
            return None
        return await asyncio.wait_for(future, timeout)

    async def send_raw(self, data: bytes) -> None:
        """Write bytes as they are (tests of malformed input)."""
        self.stream.write(data)
        await self.stream.drain()

    async def _read_loop(self) -> None:
        error: Exception = ConnectionClosed("connection closed by the broker")
        try:
            while True:
                frame = await self.stream.read_frame()
                (correlation_id,) = struct.unpack_from(">i", frame)
                pending = self._pending.pop(correlation_id, None)
                if pending is None:
                    continue
                future, api_key, version = pending
                reader = BufferReader(frame)
                decode_response_header(reader, api_key, schema.REGISTRY[api_key].is_flexible(version))
                try:
                    body = schema.decode(schema.struct_for(api_key, version, False), reader)
                except Exception as exc:  # a decoding failure belongs to that request only
                    if not future.done():
                        future.set_exception(exc)
                    continue
                if not future.done():
                    future.set_result(body)
        except ConnectionError as exc:
            error = ConnectionClosed(str(exc) or "connection closed by the broker")
        finally:
            for future, _, _ in self._pending.values():
                if not future.done():
                    future.set_exception(error)
            self._pending.clear()

    @property
    def closed(self) -> bool:
        return self._reader_task.done()

    async def wait_closed(self, timeout: float = 5.0) -> bool:
        """True once the broker has closed the connection (within ``timeout``)."""
        try:
            await asyncio.wait_for(asyncio.shield(self._reader_task), timeout)
        except asyncio.TimeoutError:
            return False
        return True

    async def close(self) -> None:
        self.stream.close()
        await self.stream.wait_closed()
        self._reader_task.cancel()
        try:
            await self._reader_task
        except asyncio.CancelledError:
            pass

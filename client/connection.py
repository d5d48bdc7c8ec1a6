"""KafkaConnection: one asyncio connection to a broker, requests matched to responses by correlation id.

Requests may be pipelined; responses are read by one task and handed to the
waiting callers. Encoding and decoding are the broker's own schemas
(``protocol``), so the client and broker can never disagree on a shape.
With SASL credentials the connection authenticates before it is handed out
and re-authenticates before the session the broker granted ends (KIP-368):
a request made when that is due waits for it, one made before is sent first.
"""

from __future__ import annotations

import asyncio
import io
import itertools
import struct
from typing import Any, Coroutine

from kbroker.client.sasl import SaslCredentials, authenticate
from kbroker.protocol import schema
from kbroker.protocol.framing import FrameStream, open_frame_stream
from kbroker.client.tasks import cancel_and_wait
from kbroker.protocol.headers import RequestHeader, decode_response_header, encode_request_header
from kbroker.protocol.types import BufferReader

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
        self._sasl: SaslCredentials | None = None
        self._reauth_at: float | None = None
        self._reauth_lock = asyncio.Lock()

    @classmethod
    async def open(cls, host: str, port: int, client_id: str = "kbroker-client",
                   timeout: float = 10.0, ssl=None, sasl: SaslCredentials | None = None) -> "KafkaConnection":
        """``ssl``: an ``ssl.SSLContext`` for a TLS listener; ``sasl``: credentials for a SASL one."""
        stream = await asyncio.wait_for(open_frame_stream(host, port, ssl=ssl), timeout)
        conn = cls(stream, client_id)
        if sasl is not None:
            try:
                await conn._authenticate(sasl, timeout)
            except BaseException:
                await conn.close()
                raise
        return conn

    async def _authenticate(self, sasl: SaslCredentials, timeout: float = 30.0) -> None:
        lifetime_ms = await authenticate(self, sasl, timeout)
        self._sasl = sasl
        # Kafka's clients re-authenticate at 85-95 % of the session: early enough for one round trip.
        self._reauth_at = asyncio.get_running_loop().time() + lifetime_ms * 0.85 / 1000 if lifetime_ms else None

    def _reauth_due(self) -> bool:
        return self._reauth_at is not None and asyncio.get_running_loop().time() >= self._reauth_at

    def request(self, api_key: int, version: int, body: dict, *, expect_response: bool = True,
                timeout: float = 30.0) -> Coroutine[Any, Any, schema.Message | None]:
        """The response (a coroutine to await; None when ``expect_response`` is false). A SASL session due for
        re-authentication (KIP-368) re-authenticates first. (A plain function returning ``request_unchecked``'s
        coroutine: a replica fetcher's every round comes here, and a coroutine wrapping it was one more frame
        to resume at each step.)"""
        if self._reauth_due() or self._reauth_lock.locked():
            return self._reauthenticated_request(api_key, version, body, expect_response, timeout)
        return self.request_unchecked(api_key, version, body, expect_response=expect_response, timeout=timeout)

    async def _reauthenticated_request(self, api_key: int, version: int, body: dict, expect_response: bool,
                                       timeout: float) -> schema.Message | None:
        async with self._reauth_lock:
            if self._reauth_due():
                await self._authenticate(self._sasl)
        return await self.request_unchecked(api_key, version, body, expect_response=expect_response,
                                            timeout=timeout)

    async def request_unchecked(self, api_key: int, version: int, body: dict, *, expect_response: bool = True,
                                timeout: float = 30.0) -> schema.Message | None:
        """``request`` without the re-authentication check (the SASL exchange itself goes this way)."""
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
        # A timer that fails the future, not asyncio.wait_for: the replica fetchers' rounds come here, and
        # wait_for's extra future and callbacks were a visible part of an idle cluster's cost.
        timer = asyncio.get_running_loop().call_later(timeout, _time_out, future, timeout)
        try:
            return await future
        finally:
            timer.cancel()

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

    async def close(self, timeout: float = 5.0) -> None:
        """Close, waiting at most ``timeout`` for the transport: a TLS close waits for the peer's close_notify,
        which a peer that stopped reading (a broker shutting down) never sends."""
        self.stream.close()
        try:
            await asyncio.wait_for(self.stream.wait_closed(), timeout)
        except asyncio.TimeoutError:
            self.stream.abort()
        await cancel_and_wait(self._reader_task)


def _time_out(future: asyncio.Future, timeout: float) -> None:
    if not future.done():
        future.set_exception(asyncio.TimeoutError(f"no response in {timeout} s"))

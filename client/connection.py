"""KafkaConnection: one asyncio connection to a broker, requests matched to responses by correlation id.

Requests may be pipelined; responses are read by one task and handed to the
waiting callers. Encoding and decoding are the broker's own schemas
(``protocol``), so the client and broker can never disagree on a shape.
With SASL credentials the connection authenticates before it is handed out
and re-authenticates before the session the broker granted ends (KIP-368):
a request made when that is due waits for it, one made before is sent first.

A ``repeater`` lets a connection answer some responses by sending their
request again, in the transport's callback, with no task woken (a follower's
idle fetch rounds, broker/replication/idle_rounds.py).
"""

from __future__ import annotations

import asyncio
import importlib.metadata
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
API_VERSIONS = 18


class NoCommonVersion(ConnectionError):
    """The peer serves no version of an API that this side can send (``KafkaConnection.usable``). A
    ConnectionError, so that a caller that retries a broker it cannot reach retries this one too (it may be
    upgraded); one with another way out catches it first."""


def _software_version() -> str:
    """kbroker's release as ApiVersions names it (Kafka's clients say "unknown" when theirs cannot be read)."""
    try:
        return importlib.metadata.version("kbroker")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


_SOFTWARE_VERSION = _software_version()


class ConnectionClosed(ConnectionError):
    pass


class KafkaConnection:
    def __init__(self, stream: FrameStream, client_id: str) -> None:
        self.stream = stream
        self.client_id = client_id
        self._correlation = itertools.count(1)
        self._pending: dict[int, _Pending] = {}
        self._repeater = None
        self._reader_task = asyncio.create_task(self._read_loop())
        self._sasl: SaslCredentials | None = None
        self._reauth_at: float | None = None
        self._reauth_lock = asyncio.Lock()
        self.peer_versions: dict[int, tuple[int, int]] | None = None   # api key -> (min, max), once negotiated

    @classmethod
    async def open(cls, host: str, port: int, client_id: str = "kbroker-client",
                   timeout: float = 10.0, ssl=None, sasl: SaslCredentials | None = None,
                   negotiate: bool = False) -> "KafkaConnection":
        """``ssl``: an ``ssl.SSLContext`` for a TLS listener; ``sasl``: credentials for a SASL one; ``negotiate``:
        ask the peer's versions (``negotiate_versions``) before the connection is handed out. A connection whose
        authentication or negotiation fails is closed, never handed out half ready."""
        stream = await asyncio.wait_for(open_frame_stream(host, port, ssl=ssl), timeout)
        conn = cls(stream, client_id)
        try:
            if sasl is not None:
                await conn._authenticate(sasl, timeout)
            if negotiate:
                await conn.negotiate_versions(timeout)
        except BaseException:
            await conn.close()
            raise
        return conn

    async def _authenticate(self, sasl: SaslCredentials, timeout: float = 30.0) -> None:
        lifetime_ms = await authenticate(self, sasl, timeout)
        self._sasl = sasl
        # Kafka's clients re-authenticate at 85-95 % of the session: early enough for one round trip.
        self._reauth_at = asyncio.get_running_loop().time() + lifetime_ms * 0.85 / 1000 if lifetime_ms else None

    @property
    def repeater(self):
        """``repeater(response, request) -> bool`` or None. Given each response as it arrives (its frame from the
        correlation id on) and the request it answers (its frame, size first, a copy it may change in place but
        for the correlation id), True: the request goes out again under a new correlation id instead of the
        response being delivered, its caller now waiting for that one's response with its timeout restarted.
        It runs in the transport's callback. Requests sent while one is set keep a copy of their frame; a
        re-authentication that is due (KIP-368) is left to the next ``request``."""
        return self._repeater

    @repeater.setter
    def repeater(self, repeater) -> None:
        self._repeater = repeater
        self.stream.intercept = None if repeater is None else self._intercept

    def _intercept(self, frame) -> bool:
        if len(frame) < 4:
            return False   # (the read loop fails the connection for it)
        (correlation_id,) = _SIZE.unpack_from(frame)
        pending = self._pending.get(correlation_id)
        if pending is None or pending.frame is None or pending.future.done() or self._reauth_due() or \
                not self._repeater(frame, pending.frame):
            return False
        again = next(self._correlation)
        _SIZE.pack_into(pending.frame, 8, again)   # (after the size, api key and version)
        del self._pending[correlation_id]
        self._pending[again] = pending
        pending.start_timer()
        self.stream.write(bytes(pending.frame))
        return True

    async def negotiate_versions(self, timeout: float = 10.0) -> None:
        """Ask the peer which versions of each API it serves (ApiVersions v3, as Kafka's clients and brokers do on
        every connection), so that ``usable`` picks each request's version: a broker of another Kafka release
        refuses a version it does not serve by closing the connection."""
        answer = await self.request(API_VERSIONS, 3, {"client_software_name": "kbroker",
                                                      "client_software_version": _SOFTWARE_VERSION}, timeout=timeout)
        if answer.error_code:
            raise ConnectionError(f"ApiVersions refused: {answer.error_code}")
        self.peer_versions = {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}

    def usable(self, api_key: int, highest: int, lowest: int = 0) -> int:
        """The highest version of ``api_key`` from ``lowest`` up to ``highest`` that the peer serves and this side
        can write (``highest`` itself before ``negotiate_versions``); NoCommonVersion when there is none (a peer of
        a release older than the request needs, or than kbroker's oldest schema of the API; one without it)."""
        if self.peer_versions is None:
            return highest
        low, high = self.peer_versions.get(api_key, (0, -1))
        declared = schema.REGISTRY.get(api_key)
        chosen = min(highest, high)
        if chosen < max(low, lowest, declared.versions.low if declared is not None else 0):
            raise NoCommonVersion(f"the peer serves no version {lowest}-{highest} of API {api_key} that kbroker "
                                  f"writes (it serves {low}-{high})")
        return chosen

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
        data = bytes(frame)
        del frame
        if not expect_response:
            await self._write(data)
            return None
        pending = self._pending[correlation_id] = _Pending(api_key, version, timeout,
                                                           None if self._repeater is None else bytearray(data))
        try:
            await self._write(data)
            return await pending.future
        finally:
            pending.timer.cancel()

    async def send_raw(self, data: bytes) -> None:
        """Write bytes as they are (tests of malformed input)."""
        await self._write(data)

    async def _write(self, data: bytes) -> None:
        """Write a frame; a broker that hung up while it was written is ConnectionClosed, as a read finds it
        (not the socket's own BrokenPipeError or ConnectionResetError, which depend on how far the write got)."""
        try:
            self.stream.write(data)
            await self.stream.drain()
        except ConnectionClosed:
            raise
        except ConnectionError as exc:
            raise ConnectionClosed(f"connection closed by the broker: {exc}") from exc

    async def _read_loop(self) -> None:
        error: Exception = ConnectionClosed("connection closed by the broker")
        try:
            while True:
                frame = await self.stream.read_frame()
                (correlation_id,) = struct.unpack_from(">i", frame)
                pending = self._pending.pop(correlation_id, None)
                if pending is None:
                    continue
                future, api_key, version = pending.future, pending.api_key, pending.version
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
            for pending in self._pending.values():
                if not pending.future.done():
                    pending.future.set_exception(error)
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


class _Pending:
    """A request waiting for its response: ``future`` is what its caller awaits, failed by ``timer`` ``timeout``
    seconds after the last send (a timer, not asyncio.wait_for: a replica fetcher's every round comes here,
    and wait_for's extra future and callbacks were a visible part of an idle cluster's cost); ``frame``: a
    copy of what was sent, kept while the connection has a ``repeater``."""

    __slots__ = ("future", "api_key", "version", "timeout", "frame", "timer")

    def __init__(self, api_key: int, version: int, timeout: float, frame: bytearray | None) -> None:
        self.future = asyncio.get_running_loop().create_future()
        self.api_key, self.version, self.timeout, self.frame = api_key, version, timeout, frame
        self.timer = None
        self.start_timer()

    def start_timer(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.timer = asyncio.get_running_loop().call_later(self.timeout, _time_out, self.future, self.timeout)


def _time_out(future: asyncio.Future, timeout: float) -> None:
    if not future.done():
        future.set_exception(asyncio.TimeoutError(f"no response in {timeout} s"))

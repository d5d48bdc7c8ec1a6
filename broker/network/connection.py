"""One client connection: dispatch, in-order responses, backpressure (frames come from ``protocol.framing``).

Invariants:
* a frame is ``int32 size`` + ``size`` bytes; the size is checked against
  ``socket.request.max.bytes`` before anything is allocated (by the
  connection's ``FrameStream``);
* requests take effect in the order they arrive: a handler's state change
  (an append, say) happens before the next request is decoded. Only the
  waiting overlaps: a handler may return a future (it parked in a purgatory);
* connections are served fairly: one whose requests are already waiting is
  served ``FAIR_SLICE`` of them and then yields to the event loop, so a
  pipelining client delays others by a few milliseconds at most;
* responses leave in request order, each written with ``drain()`` so a slow
  reader slows the broker's writes to it, never its memory (a parked
  request's response, sent from its future's callback, is written there only
  while the transport is below its high-water mark, else by the writer task);
* anything malformed closes this connection only: it is logged, and every
  other client is served as before;
* on a SASL listener nothing but ApiVersions and the SASL exchange is served
  until the session is authenticated (``broker.security.sasl``), and frames
  are capped at ``sasl.server.max.receive.size`` until then.
"""

from __future__ import annotations

import asyncio
import io
import struct
import time

import structlog
from construct import ConstructError

from kbroker.broker.network.context import CLOSE_CONNECTION, NO_RESPONSE, EncodedBody, RequestContext
from kbroker.broker.network.idle_fetches import IdleFetches
from kbroker.broker.network.log_regions import write_answer
from kbroker.broker.network.registry import HANDLERS, api_versions_list
from kbroker.broker.configuration.quotas import EXEMPT_APIS, REQUEST, throttle_for
from kbroker.broker.security.principal import ANONYMOUS, PrincipalError, tls_principal
from kbroker.broker.security.sasl import SaslFailure, State
from kbroker.protocol import schema
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.framing import FrameStream, FrameTooLarge
from kbroker.protocol.headers import API_VERSIONS_KEY, decode_request_header, peek_header, response_header
from kbroker.protocol.types import BufferReader

_SIZE = struct.Struct(">i")
MAX_QUEUED_RESPONSES = 64
# A connection whose client pipelines requests is served this many in a row, then waits its turn behind the
# other connections' (without it, one read of 256 KiB of small requests was served in one go: 20 such clients
# held a fresh connection's request for seconds).
FAIR_SLICE = 4
log = structlog.get_logger("broker.connection")


class Encoded(tuple):
    """A response already encoded (``Connection._encode``'s pair), queued for the writer task to send as it is."""

    def __new__(cls, buf, regions):
        return super().__new__(cls, (buf, regions))


class CloseConnection(Exception):
    """This connection must be closed (the reason is logged where it is raised).

    ``after_responses``: the responses already due are written first (a failed
    acks=0 produce); otherwise (malformed input) the connection closes at once
    and whatever it had parked is abandoned, as Kafka drops a bad channel.
    """

    def __init__(self, after_responses: bool = False) -> None:
        super().__init__()
        self.after_responses = after_responses


class Connection:
    def __init__(self, broker, stream: FrameStream, listener: str = "") -> None:
        self.broker = broker
        self.listener = listener
        self.stream = stream
        peer = stream.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.log = log.bind(peer=self.peer)
        # Responses that cannot be sent at once (a parked request, one queued behind it) go through a queue and
        # a writer task, both made when first needed: most connections never need them, and an idle connection
        # without them costs 4 KB less.
        self.responses: asyncio.Queue | None = None
        self._responder: asyncio.Task | None = None
        self._writer_busy = False   # the writer task is between taking a response and finishing its send
        # A parked request's (correlation id, api, version, future, timing) when nothing was owed before it: its
        # response leaves from the future's callback, without the queue and the writer task (a long poll, an
        # acks=all produce). Whatever comes after it sends it to the queue first (``_unpark``).
        self._parked: tuple | None = None
        self.held = None   # a follower's idle fetch held from the transport's callback (a HeldFetch)
        self.after_response: list = []   # RequestContext.run_after_response's actions for the current request
        self.on_close: list | None = None   # callbacks when the connection ends (a share session it holds)
        self.client_software = ("", "")     # name and version, from ApiVersions v3+ (client telemetry matches them)
        sock = stream.get_extra_info("socket")
        tls = stream.get_extra_info("ssl_object")
        # Where large log regions may go out by sendfile: plaintext only (TLS must encrypt them)
        self.sendfile_fd = sock.fileno() if sock is not None and tls is None and \
            broker.config["kbroker.fetch.sendfile"] else -1
        security = broker.listener_security.get(listener)
        self.principal = ANONYMOUS
        self.refused = False   # run() closes the connection at once
        if tls is not None and security is not None:
            try:
                self.principal = tls_principal(tls.getpeercert(), security.principal_rules)
            except PrincipalError as exc:
                self.refused = True
                self.log.warning("authentication_failed", reason=str(exc))
        if self.principal != ANONYMOUS:
            self.log = self.log.bind(principal=self.principal)
            self.log.debug("tls_authenticated")
        self.sasl = security.sasl_session(broker) if security is not None and security.sasl else None
        if self.sasl is not None:
            self.principal = None   # no one until the SASL exchange says who
            self._max_frame = stream.max_frame
            stream.max_frame = min(stream.max_frame, broker.config["sasl.server.max.receive.size"])
        self.stopping = False   # the broker is shutting down: answer what was read, then close
        self.ip = peer[0] if peer else "?"
        self.last_active = time.monotonic()   # a request read or a response sent (connections.max.idle.ms)
        self.muted_until = 0.0   # over a quota: no request is read before this (monotonic) time
        self.timed = broker.config["metrics.port"] >= 0   # request phases recorded for the metrics

    def throttle(self, ms: int) -> None:
        """Read nothing more from this client for ``ms`` (its quota's throttle time), as Kafka mutes a channel."""
        self.muted_until = max(self.muted_until, time.monotonic() + ms / 1000)

    def idle_for(self, now: float) -> float:
        """Seconds since this connection last read a request or sent a response, 0 while it owes one."""
        return now - self.last_active if self.owes_nothing() else 0.0

    def owes_nothing(self) -> bool:
        """No response is due before the next one: none queued, none being written, none parked or held."""
        return not self._writer_busy and self._parked is None and self.held is None and not self._responses_queued()

    def hold_idle_fetches(self) -> None:
        """This connection carries a follower's incremental fetch session: from now its idle fetches may be
        held and answered from the transport's callback (broker/network/idle_fetches.py)."""
        if self.stream.intercept is None:
            self.stream.intercept = IdleFetches(self)

    def _responses_queued(self) -> bool:
        return self.responses is not None and not self.responses.empty()

    def _queue(self) -> asyncio.Queue:
        """The response queue, and its writer task, made on first use."""
        if self.responses is None:
            self.responses = asyncio.Queue(MAX_QUEUED_RESPONSES)
            self._responder = asyncio.create_task(self._write_responses())
        return self.responses

    def _responder_done(self) -> bool:
        return self._responder is not None and self._responder.done()

    async def run(self) -> None:
        if self.refused:
            self.stream.close()
            return
        answer_pending = False
        streak = 0   # requests handled in a row without waiting for the socket
        try:
            while not self._responder_done():
                if self.stream.frames_waiting:
                    streak += 1
                    if streak > FAIR_SLICE:
                        streak = 0
                        await asyncio.sleep(0)   # let every other connection take its turn first
                else:
                    streak = 0
                wait = self.muted_until - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)   # throttled (one timed wait per throttle, not a poll)
                try:
                    frame = await self.stream.read_frame()
                except FrameTooLarge as exc:
                    self.log.warning("request_too_large", size=exc.size, limit=exc.limit)
                    break
                except ConnectionError:
                    break
                self.last_active = time.monotonic()
                try:
                    await self._dispatch(frame, time.perf_counter() if self.timed else 0.0)
                except CloseConnection as close:
                    answer_pending = close.after_responses
                    break
                finally:
                    if self.after_response:
                        self._run_after_response()
        finally:
            if self.held is not None:
                self.held.release(answer=self.stopping)
            if self._parked is not None:
                if answer_pending or self.stopping:
                    self._unpark()   # (the writer sends it once it is ready, as it does the rest)
                else:
                    parked, self._parked = self._parked, None
                    parked[3].cancel()   # nobody will read it: the parked request leaves its purgatory now
            responder = self._responder
            if responder is None:
                pass   # every answer went out as it was made
            elif not (answer_pending or self.stopping) or responder.done():
                # Nobody will read the answers: parked requests leave their purgatories now, not at timeout.
                responder.cancel()
                self._abandon_responses()
            else:
                await self.responses.put(None)
                try:
                    await asyncio.wait_for(responder, timeout=30)
                except (asyncio.TimeoutError, ConnectionError):
                    responder.cancel()
                    self._abandon_responses()
            self.stream.close()

    def _run_after_response(self) -> None:
        actions, self.after_response = self.after_response, []
        for action in actions:
            try:
                action()
            except Exception:
                self.log.exception("after_response_action_failed")

    def stop_reading(self) -> None:
        """Broker shutdown: read no more requests; those already read are still answered."""
        self.stopping = True
        self.stream.end_input()

    def _abandon_responses(self) -> None:
        while self._responses_queued():
            item = self.responses.get_nowait()
            if item is not None and isinstance(item[3], asyncio.Future):
                item[3].cancel()

    async def _dispatch(self, frame: bytes, read_at: float) -> None:
        if self.broker.cluster is not None:
            self.broker.cluster.check_paused()   # a broker paused past its session leads nothing any more
        if self.sasl is not None and self.sasl.raw_tokens:
            await self._raw_sasl_token(frame)
            return
        try:
            api_key, api_version, correlation_id = peek_header(frame)
        except ConstructError:
            self.log.warning("malformed_request_header", size=len(frame))
            raise CloseConnection from None
        if self.sasl is not None and not self.sasl.admits(api_key):
            if self.sasl.state is State.AUTHENTICATED:
                self.log.info("sasl_session_expired", api_key=api_key)
            else:
                self.log.warning("unexpected_request_before_authentication", api_key=api_key,
                                 state=self.sasl.state.value)
            raise CloseConnection
        handler = HANDLERS.get(api_key)
        if handler is None:
            self.log.warning("unknown_api_key", api_key=api_key, correlation_id=correlation_id)
            raise CloseConnection
        if not handler.supports(api_version):
            if api_key == API_VERSIONS_KEY:  # KIP-511: answer with a v0 body naming what we support
                self.log.info("unsupported_api_versions_version", api_version=api_version)
                body = {"error_code": ErrorCode.UNSUPPORTED_VERSION, "api_keys": api_versions_list()}
                await self._enqueue((correlation_id, api_key, 0, body, None))
                return
            self.log.warning("unsupported_version", api=handler.name, api_version=api_version)
            raise CloseConnection
        declared = schema.REGISTRY[api_key]
        flexible = declared.is_flexible(api_version)
        reader = BufferReader(frame)
        try:
            header = decode_request_header(reader, flexible)
            request = schema.decode(schema.struct_for(api_key, api_version, True), reader)
        except (ConstructError, UnicodeDecodeError, ValueError, IndexError) as exc:
            self.log.warning("malformed_request", api=handler.name, api_version=api_version, error=str(exc))
            raise CloseConnection from None
        ctx = RequestContext(self.broker, api_key, api_version, correlation_id, header.client_id, self.log,
                             self.peer, self.listener, self, handler.name)
        self.log.debug("request_received", api=handler.name, correlation_id=correlation_id)
        metered = self.broker.quotas.enabled and api_key not in EXEMPT_APIS
        started = time.perf_counter() if metered or self.timed else 0.0
        try:
            result = handler.handle(ctx, request)
            if asyncio.iscoroutine(result):
                result = await result
        except CloseConnection:
            raise
        except Exception:
            ctx.log.exception("handler_failed")
            raise CloseConnection from None
        # (api, version, read, handler started, handler done): the request's phases for the metrics
        timing = (handler.name, api_version, read_at, started, time.perf_counter()) if self.timed else None
        if metered:
            throttle = throttle_for(ctx, REQUEST, (time.perf_counter() - started) * 1000)
            if throttle and isinstance(result, dict) and "throttle_time_ms" in result:
                result["throttle_time_ms"] = max(result["throttle_time_ms"], throttle)
        if result is NO_RESPONSE:
            return
        if result is CLOSE_CONNECTION:
            raise CloseConnection(after_responses=True)
        if self.sasl is not None and self.sasl.state is not State.AUTHENTICATED:
            if self.sasl.state is State.FAILED:   # answered with the error, then closed, as Kafka does
                await self._enqueue((correlation_id, api_key, api_version, result, None))
                raise CloseConnection(after_responses=True)
        if isinstance(result, asyncio.Future):
            if self.owes_nothing():
                self._parked = (correlation_id, api_key, api_version, result, timing)
                result.add_done_callback(self._parked_done)
                return
        elif self.owes_nothing():
            # Nothing is ahead of this response: send it now and skip the hand-off to the writer task.
            # Safe for ordering: the next request is read only after this returns.
            try:
                await self._send(correlation_id, api_key, api_version, result)
            except ConnectionError:
                raise CloseConnection from None
            except Exception:
                ctx.log.exception("response_failed")
                raise CloseConnection from None
            if timing is not None:
                self.broker.metrics.request_done(*timing, timing[4], time.perf_counter())
            return
        await self._enqueue((correlation_id, api_key, api_version, result, timing))

    async def _enqueue(self, item: tuple) -> None:
        """A response for the writer task, behind the parked one if there is one."""
        self._unpark()
        await self._queue().put(item)

    def _unpark(self) -> None:
        """The parked response goes to the writer task's queue, whose head it becomes (nothing is queued while one
        is parked): what comes after it then waits behind it."""
        parked, self._parked = self._parked, None
        if parked is not None:
            parked[3].remove_done_callback(self._parked_done)
            self._queue().put_nowait(parked)

    def _parked_done(self, future: asyncio.Future) -> None:
        """The parked request is answered: its response goes out now, written at once where nothing has to wait
        (no log regions to send, the socket not backed up), else by the writer task, encoded already."""
        parked = self._parked
        if parked is None or parked[3] is not future:
            return   # handed to the writer meanwhile (this callback was already scheduled): it sends it
        self._parked = None
        if future.cancelled():
            # Cancelled elsewhere (this connection lets go of a parked future before it cancels one): the
            # connection ends, as it did when the writer task awaited such a future.
            self.end()
            return
        correlation_id, api_key, api_version, _, timing = parked
        ready = time.perf_counter() if timing is not None else 0.0
        try:
            answer = self._encode(correlation_id, api_key, api_version, future.result())
            if answer[1] or not self.stream.writable:
                self._queue().put_nowait((correlation_id, api_key, api_version, Encoded(*answer), timing))
                return
            self.stream.write(answer[0])
            self.last_active = time.monotonic()
        except ConnectionError:
            self.end()
            return
        except Exception:
            self._failed(api_key, correlation_id)
            return
        if timing is not None:
            self.broker.metrics.request_done(*timing, ready, time.perf_counter())

    def _failed(self, api_key: int, correlation_id: int) -> None:
        self.log.exception("response_failed", api_key=api_key, correlation_id=correlation_id)
        self.end()

    def end(self) -> None:
        """A response could not be sent: the connection ends (the client retries, as it could not were the
        response silently missing)."""
        self.stream.close()
        self.stream.end_input()

    def authenticated(self) -> None:
        """The SASL session completed (first time or again): the connection now acts as its principal."""
        if self.principal is None:
            self.stream.max_frame = self._max_frame
        if self.principal != self.sasl.principal:
            self.principal = self.sasl.principal
            self.log = self.log.bind(principal=self.principal)
        self.log.info("sasl_authenticated", mechanism=self.sasl.mechanism)

    async def _raw_sasl_token(self, token: bytes) -> None:
        """After a v0 SaslHandshake the exchange's tokens are bare size-prefixed frames, with no header and no
        error to report: a failure closes the connection."""
        try:
            answer = self.sasl.authenticate(token)
        except SaslFailure as exc:
            self.log.warning("authentication_failed", mechanism=self.sasl.mechanism, user=self.sasl.attempted_user,
                             reason=str(exc))
            raise CloseConnection from None
        if self.sasl.state is State.AUTHENTICATED:
            self.authenticated()
        await self._enqueue((None, None, None, answer, None))

    async def _write_responses(self) -> None:
        """Write responses in request order. Any failure closes the connection: the client
        then retries, which a silently missing response would not let it do."""
        while True:
            item = await self.responses.get()
            if item is None:
                return
            correlation_id, api_key, api_version, result, timing = item
            self._writer_busy = True
            try:
                if isinstance(result, asyncio.Future):
                    result = await result
                ready = time.perf_counter() if timing is not None else 0.0
                await self._send(correlation_id, api_key, api_version, result)
                self._writer_busy = False
                if timing is not None:
                    self.broker.metrics.request_done(*timing, ready, time.perf_counter())
            except (ConnectionError, asyncio.CancelledError):
                self.end()
                raise
            except Exception:
                self._failed(api_key, correlation_id)
                return

    async def _send(self, correlation_id: int, api_key: int, api_version: int, body: dict) -> None:
        self.log.debug("response_sending", api_key=api_key, correlation_id=correlation_id)
        if api_key is None:   # a bare SASL token (v0 handshake)
            self.stream.writelines([_SIZE.pack(len(body)), body])
            await self.stream.drain()
            return
        buf, regions = body if isinstance(body, Encoded) else self._encode(correlation_id, api_key, api_version, body)
        if not regions:
            self.stream.write(buf)
            del buf
            await self.stream.drain()
        else:
            await write_answer(self.stream, buf, regions, self.broker.send_memory, self.sendfile_fd)
        self.last_active = time.monotonic()

    @staticmethod
    def _encode(correlation_id: int, api_key: int, api_version: int, body: dict) -> tuple:
        """(the response's bytes, size first, with its log regions' places left out; the regions, each with its
        position in those bytes)."""
        out = io.BytesIO()
        out.write(b"\0\0\0\0")
        out.write(response_header(correlation_id, api_key, schema.REGISTRY[api_key].is_flexible(api_version)))
        if isinstance(body, EncodedBody):
            out.write(body)
            regions = ()
        else:
            _, regions = schema.encode(schema.struct_for(api_key, api_version, False), body, out)
        buf = out.getbuffer()
        _SIZE.pack_into(buf, 0, len(buf) - 4 + sum(region.length for _, region in regions))
        return buf, regions


def accept(broker, stream: FrameStream, listener: str = "") -> "Connection":
    """A transport was just made: the connection is the broker's from this moment (not from when its task first
    runs), so a shutdown that starts in between still reaches it and no transport outlives the broker."""
    peer = stream.get_extra_info("peername")
    refusal = broker.connection_limits.admit(peer[0] if peer else "?", listener)
    if refusal is not None:
        log.warning("connection_refused", peer=f"{peer[0]}:{peer[1]}" if peer else "?", listener=listener,
                    reason=refusal.reason, held_ms=int(refusal.hold_s * 1000))
        if refusal.hold_s > 0:
            broker.connection_limits.hold(stream, refusal.hold_s)
        else:
            stream.abort()
        return None
    conn = Connection(broker, stream, listener)
    broker.connections.add(conn)
    conn.task = asyncio.get_running_loop().create_task(_serve(broker, conn))
    return conn


async def _serve(broker, conn: Connection) -> None:
    try:
        await conn.run()
    except asyncio.CancelledError:
        raise
    except Exception:
        conn.log.exception("connection_failed")
    finally:
        conn.stream.close()
        for callback in conn.on_close or ():
            try:
                callback()
            except Exception:   # one callback's failure must not keep the others from running
                conn.log.exception("on_close_failed")
        broker.connections.discard(conn)
        broker.connection_limits.release(conn.ip, conn.listener)

"""``GET /metrics`` on ``metrics.host:metrics.port``, served on the broker's event loop.

The text is prometheus-client's own exposition (``generate_latest``) of a
registry holding only this broker's collector (several brokers in one
process, as the tests run them, each have their own). It is made on the loop
thread so that it reads the broker's state between requests, never during one.
"""

from __future__ import annotations

import asyncio

import structlog
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from kbroker.broker.metrics.collector import BrokerCollector
from kbroker.broker.metrics.telemetry_collector import ClientTelemetryCollector

log = structlog.get_logger("broker.metrics")
MAX_REQUEST_HEAD = 8192


class MetricsServer:
    def __init__(self, broker) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(BrokerCollector(broker))
        self.registry.register(ClientTelemetryCollector(broker.client_telemetry))
        self.server: asyncio.AbstractServer | None = None
        self.port = 0

    async def start(self, host: str, port: int) -> None:
        self.server = await asyncio.start_server(self._serve, host, port, reuse_address=True)
        self.port = self.server.sockets[0].getsockname()[1]
        log.info("metrics_listening", host=host, port=self.port)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            method, _, rest = head.partition(b" ")
            path = rest.split(b" ", 1)[0].split(b"?", 1)[0]
            if method not in (b"GET", b"HEAD"):
                status, body, kind = b"405 Method Not Allowed", b"", b"text/plain"
            elif path in (b"/metrics", b"/"):
                try:
                    status, body, kind = b"200 OK", generate_latest(self.registry), CONTENT_TYPE_LATEST.encode()
                except Exception:   # a collector bug: say so to the scraper, and in the log
                    log.exception("metrics_collection_failed")
                    status, body, kind = b"500 Internal Server Error", b"metrics collection failed\n", b"text/plain"
            else:
                status, body, kind = b"404 Not Found", b"metrics are at /metrics\n", b"text/plain"
            writer.write(b"HTTP/1.1 " + status + b"\r\nContent-Type: " + kind + b"\r\nContent-Length: "
                         + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n"
                         + (body if method == b"GET" else b""))
            await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, asyncio.TimeoutError, ConnectionError):
            pass   # a client that went away or sent no request: nothing to answer
        except Exception:
            log.exception("metrics_request_failed")
        finally:
            writer.close()

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            try:
                await asyncio.wait_for(self.server.wait_closed(), 5)
            except asyncio.TimeoutError:
                pass

"""rsocket-py 0.4.20 echo server for sluice's RSocket client.

Usage: server.py [PORT]   (default 0: any free port on 127.0.0.1)
Prints JSON lines on stdout: first {"event": "listening", "port": N}, then
one line per thing only the server can observe: {"event": "fnf", ...},
{"event": "metadata_push", ...}, {"event": "cancel", "sent": N}.
Echo rules mirror `sluice rsocket serve`: request-response echoes data and
metadata; request-stream with data "n" emits "0".."n-1"; request-channel
echoes; data "error:MSG" fails with APPLICATION_ERROR(MSG).
"""
import asyncio
import json
import sys

from reactivestreams.publisher import Publisher
from reactivestreams.subscriber import Subscriber
from reactivestreams.subscription import Subscription
from rsocket.helpers import create_future
from rsocket.payload import Payload
from rsocket.request_handler import BaseRequestHandler
from rsocket.rsocket_server import RSocketServer
from rsocket.streams.stream_from_generator import StreamFromGenerator
from rsocket.transports.tcp import TransportTCP


def event(**kw):
    print(json.dumps(kw), flush=True)


def check(payload):
    data = bytes(payload.data or b"")
    if data.startswith(b"error:"):
        # rsocket-py sends any non-protocol exception as APPLICATION_ERROR(str(e)).
        raise RuntimeError(data[len(b"error:"):].decode())


class ChannelEcho(Publisher, Subscription, Subscriber):
    """Echoes the requester's payloads back, within the requester's credits."""

    def __init__(self, first):
        self.buf = [first]
        self.credits = 0
        self.done = False
        self.finished = False
        self.out = None
        self.inbound = None

    # Publisher / Subscription: our half towards the requester.
    def subscribe(self, subscriber):
        self.out = subscriber
        subscriber.on_subscribe(self)

    def request(self, n):
        self.credits += n
        self.pump()

    def cancel(self):
        self.finished = True
        if self.inbound is not None:
            self.inbound.cancel()

    # Subscriber: the requester's payloads.
    def on_subscribe(self, subscription):
        self.inbound = subscription
        subscription.request(8)

    def on_next(self, value, is_complete=False):
        self.buf.append(Payload(bytes(value.data or b""), value.metadata))
        if is_complete:
            self.done = True
        elif self.inbound is not None:
            self.inbound.request(1)
        self.pump()

    def on_complete(self):
        self.done = True
        self.pump()

    def on_error(self, exception):
        self.done = True
        self.pump()

    def pump(self):
        if self.out is None or self.finished:
            return
        while self.credits > 0 and self.buf:
            self.credits -= 1
            self.out.on_next(self.buf.pop(0))
        if self.done and not self.buf:
            self.finished = True
            self.out.on_complete()


class Echo(BaseRequestHandler):
    async def request_response(self, payload):
        check(payload)
        return create_future(Payload(payload.data, payload.metadata))

    async def request_fire_and_forget(self, payload):
        event(event="fnf", data=bytes(payload.data).decode(errors="replace"))

    async def on_metadata_push(self, payload):
        event(event="metadata_push", metadata=bytes(payload.metadata).decode(errors="replace"))

    async def request_stream(self, payload):
        check(payload)
        n = int(bytes(payload.data))
        sent = [0]

        def gen():
            for i in range(n):
                sent[0] = i + 1
                yield Payload(str(i).encode()), i == n - 1

        return StreamFromGenerator(gen, on_cancel=lambda: event(event="cancel", sent=sent[0]))

    async def request_channel(self, payload):
        check(payload)
        echo = ChannelEcho(Payload(bytes(payload.data or b""), payload.metadata))
        return echo, echo


async def main():
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 0

    def session(reader, writer):
        # fragment_size_bytes: responses over 16 MiB must be fragmented on TCP.
        RSocketServer(TransportTCP(reader, writer), handler_factory=Echo, fragment_size_bytes=1024 * 1024)

    server = await asyncio.start_server(session, "127.0.0.1", port, limit=64 * 1024 * 1024)
    event(event="listening", port=server.sockets[0].getsockname()[1])
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass

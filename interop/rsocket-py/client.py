"""rsocket-py 0.4.20 client driving a sluice RSocket echo server.

Usage: client.py HOST PORT
Runs every case against the server and prints one JSON line per case:
{"case": NAME, "ok": bool, "detail": str}. Each case has its own timeout,
so a hang shows up as a failed case, not a stuck run.
"""
import asyncio
import json
import sys

from reactivestreams.subscriber import Subscriber
from rsocket.awaitable.collector_subscriber import CollectorSubscriber
from rsocket.helpers import single_transport_provider
from rsocket.payload import Payload
from rsocket.rsocket_client import RSocketClient
from rsocket.streams.stream_from_generator import StreamFromGenerator
from rsocket.transports.tcp import TransportTCP

CASE_TIMEOUT = 20.0
LARGE = 20 * 1024 * 1024


def report(case, ok, detail=""):
    print(json.dumps({"case": case, "ok": bool(ok), "detail": str(detail)[:300]}), flush=True)


async def connect(host, port, **kw):
    reader, writer = await asyncio.open_connection(host, port, limit=64 * 1024 * 1024)
    client = RSocketClient(single_transport_provider(TransportTCP(reader, writer)), **kw)
    await client.connect()
    return client


async def rr(c):
    p = await c.request_response(Payload(b"hello", b"meta"))
    return p.data == b"hello" and p.metadata == b"meta", f"data {bytes(p.data).decode()!r} metadata {bytes(p.metadata).decode()!r} echoed"


async def fnf(c):
    await c.fire_and_forget(Payload(b"fnf-from-py"))
    return True, "sent; the Go side checks it arrived"


async def metadata_push(c):
    await c.metadata_push(b"push-from-py")
    return True, "sent; the Go side checks it arrived"


async def stream(c):
    sub = CollectorSubscriber(limit_rate=3)  # REQUEST_N batches of 3
    c.request_stream(Payload(b"10")).initial_request_n(3).subscribe(sub)
    vals = [bytes(p.data) for p in await sub.run()]
    want = [str(i).encode() for i in range(10)]
    return vals == want, f"got {[v.decode() for v in vals]}"


async def channel(c):
    def gen():
        yield Payload(b"b"), False
        yield Payload(b"c"), True

    sub = CollectorSubscriber(limit_rate=2)
    c.request_channel(Payload(b"a"), publisher=StreamFromGenerator(gen)).initial_request_n(2).subscribe(sub)
    vals = [bytes(p.data) for p in await sub.run()]
    return vals == [b"a", b"b", b"c"], f"got {[v.decode() for v in vals]}"


async def error(c):
    try:
        p = await c.request_response(Payload(b"error:boom"))
        return False, f"expected an error, got {p.data!r}"
    except Exception as e:  # rsocket-py surfaces APPLICATION_ERROR as RuntimeError(message)
        return type(e) is RuntimeError and str(e) == "boom", f"{type(e).__name__}: {e}"


class FiveThenCancel(Subscriber):
    def __init__(self):
        self.vals = []
        self.done = asyncio.Event()
        self.sub = None

    def on_subscribe(self, subscription):
        self.sub = subscription

    def on_next(self, value, is_complete=False):
        self.vals.append(bytes(value.data))
        if len(self.vals) == 5:
            self.sub.cancel()
            self.done.set()
        elif is_complete:
            self.done.set()

    def on_error(self, exception):
        self.vals.append(f"error {exception}")
        self.done.set()

    def on_complete(self):
        self.done.set()


async def cancel(c):
    s = FiveThenCancel()
    c.request_stream(Payload(b"1000000")).initial_request_n(5).subscribe(s)
    await s.done.wait()
    return s.vals == [str(i).encode() for i in range(5)], f"CANCEL after {[v.decode() if isinstance(v, bytes) else v for v in s.vals]}"


async def concurrent(c):
    n = 1000
    res = await asyncio.gather(*(c.request_response(Payload(b"r%d" % i)) for i in range(n)))
    bad = [i for i, p in enumerate(res) if p.data != b"r%d" % i]
    return not bad, f"{n} requests, {len(bad)} wrong answers"


async def large(host, port):
    # rsocket-py fragments only with fragment_size_bytes (whole frame incl. the 3-byte length).
    c = await connect(host, port, fragment_size_bytes=1024 * 1024)
    try:
        data = bytes((i * 7) & 0xFF for i in range(256)) * (LARGE // 256)
        p = await c.request_response(Payload(data, b"big"))
        return p.data == data and p.metadata == b"big", f"{len(data)} bytes echoed; fragment_size_bytes=1 MiB on the py side, 1 MiB max frame on ours"
    finally:
        await c.close()


async def main():
    host, port = sys.argv[1], int(sys.argv[2])
    c = await connect(host, port)
    cases = [("request_response", lambda: rr(c)), ("fire_and_forget", lambda: fnf(c)),
             ("metadata_push", lambda: metadata_push(c)), ("request_stream", lambda: stream(c)),
             ("request_channel", lambda: channel(c)), ("error", lambda: error(c)),
             ("cancel", lambda: cancel(c)), ("concurrent_1000", lambda: concurrent(c)),
             ("large_20MiB", lambda: large(host, port))]
    only = set(sys.argv[3:])
    for name, f in cases:
        if only and name not in only:
            continue
        try:
            ok, detail = await asyncio.wait_for(f(), CASE_TIMEOUT)
            report(name, ok, detail)
        except Exception as e:
            report(name, False, f"{type(e).__name__}: {e!r}")
    await c.close()


if __name__ == "__main__":
    asyncio.run(main())

// rsocket-js 1.0.0-alpha.3 client driving a sluice RSocket echo server
// (rsocket/interop_js_test.go).
//
// Usage: node client.js tcp://HOST:PORT | ws://HOST:PORT/PATH [CASE ...]
// Runs every case (or the named ones) on one connection and prints one
// JSON line per case: {"case":NAME,"ok":bool,"limitation":bool,"detail":S}.
// "limitation" marks what rsocket-js itself cannot do; the Go side
// records it as a peer limitation, never as a pass. Each case has its own
// timeout, so a hang shows up as a failed case, not a stuck run.
"use strict";

const { RSocketConnector } = require("rsocket-core");
const { TcpClientTransport } = require("rsocket-tcp-client");
const { WebsocketClientTransport } = require("rsocket-websocket-client");
const WebSocket = require("ws");

const CASE_TIMEOUT_MS = 20000;
const LARGE = 20 << 20;
const APPLICATION_ERROR = 0x201;

function report(name, ok, detail, limitation = false) {
  process.stdout.write(JSON.stringify({ case: name, ok: !!ok, limitation, detail: String(detail).slice(0, 400) }) + "\n");
}

function rr(rs, payload) {
  return new Promise((resolve, reject) => {
    rs.requestResponse(payload, {
      onNext: (p) => resolve(p),
      onComplete: () => resolve(null),
      onError: reject,
      onExtension() {},
    });
  });
}

const str = (b) => (b ? b.toString() : "");

// The responder for the sluice server's own requests on this connection
// (peers are symmetric): request-response answers "js:" + data;
// request-stream with data "n" emits "0".."n-1" within the credits.
// served resolves once both were answered in full.
const seen = { rr: null, stream: null, requestN: 0 };
let markServed;
const served = new Promise((resolve) => (markServed = resolve));
const checkServed = () => seen.rr !== null && seen.stream !== null && markServed();
const responder = {
  requestResponse(p, out) {
    setImmediate(() => {
      out.onNext({ data: Buffer.from("js:" + str(p.data)) }, true);
      seen.rr = str(p.data);
      checkServed();
    });
    return { cancel() {}, onExtension() {} };
  },
  requestStream(p, initialN, out) {
    const n = Number.parseInt(str(p.data), 10);
    let credits = initialN;
    let sent = 0;
    const pump = () => {
      while (credits > 0 && sent < n) {
        credits--;
        sent++;
        out.onNext({ data: Buffer.from(String(sent - 1)) }, sent === n);
      }
      if (sent === n && seen.stream === null) {
        seen.stream = n;
        checkServed();
      }
    };
    setImmediate(pump);
    return {
      request(k) {
        seen.requestN++;
        credits += k;
        pump();
      },
      cancel() {},
      onExtension() {},
    };
  },
};

const cases = {
  async request_response(rs) {
    const p = await rr(rs, { data: Buffer.from("hello"), metadata: Buffer.from("meta") });
    return [str(p.data) === "hello" && str(p.metadata) === "meta", `data "${str(p.data)}" metadata "${str(p.metadata)}" echoed`];
  },

  async fire_and_forget(rs) {
    await new Promise((resolve, reject) =>
      rs.fireAndForget({ data: Buffer.from("fnf-from-js") }, { onComplete: resolve, onError: reject }),
    );
    return [true, "sent; the Go side checks it arrived"];
  },

  async metadata_push(rs) {
    try {
      rs.metadataPush(Buffer.from("push-from-js"), { onComplete() {}, onError() {} });
      return [true, "sent"];
    } catch (e) {
      return [false, `rsocket-js cannot send METADATA_PUSH: its requester throws "${e.message}"`, true];
    }
  },

  // 100 elements with REQUEST_N in batches of 3, never more in flight than
  // granted.
  async request_stream(rs) {
    const got = [];
    let granted = 3;
    let nRequestN = 0;
    let over = false;
    await new Promise((resolve, reject) => {
      const s = rs.requestStream({ data: Buffer.from("100") }, 3, {
        onNext(p, done) {
          got.push(str(p.data));
          if (got.length > granted) over = true;
          if (done) return resolve();
          if (got.length === granted) {
            granted += 3;
            nRequestN++;
            s.request(3);
          }
        },
        onComplete: resolve,
        onError: reject,
        onExtension() {},
      });
    });
    const want = Array.from({ length: 100 }, (_, i) => String(i));
    const ok = !over && got.join(",") === want.join(",");
    return [ok, `${got.length} elements in order with REQUEST_N(3) x${nRequestN} after the initial 3${over ? "; MORE THAN GRANTED" : ""}`];
  },

  async request_channel(rs) {
    const got = [];
    const toSend = ["b", "c"];
    await new Promise((resolve, reject) => {
      let ours = null;
      let credits = 0;
      const pump = () => {
        while (ours && credits > 0 && toSend.length > 0) {
          credits--;
          ours.onNext({ data: Buffer.from(toSend.shift()) }, false);
        }
        if (ours && toSend.length === 0 && !ours.sentComplete) {
          ours.sentComplete = true;
          ours.onComplete();
        }
      };
      ours = rs.requestChannel({ data: Buffer.from("a") }, 2, false, {
        onNext(p, done) {
          got.push(str(p.data));
          if (got.length % 2 === 0 && !done) ours.request(2);
          if (done) resolve();
        },
        onComplete: resolve,
        onError: reject,
        onExtension() {},
        // The responder's credits for our payloads.
        request(k) {
          credits += k;
          pump();
        },
        cancel() {
          reject(new Error("the responder cancelled our half"));
        },
      });
    });
    return [got.join(",") === "a,b,c", `echoed ${JSON.stringify(got)}, completed`];
  },

  async error(rs) {
    try {
      const p = await rr(rs, { data: Buffer.from("error:boom") });
      return [false, `expected an error, got "${str(p && p.data)}"`];
    } catch (e) {
      // rsocket-js errors fail instanceof RSocketError across module
      // copies; the code is what counts.
      const ok = e.code === APPLICATION_ERROR && e.message === "boom";
      return [ok, `error code 0x${(e.code || 0).toString(16)} message "${e.message}"`];
    }
  },

  async cancel(rs) {
    const got = [];
    await new Promise((resolve, reject) => {
      const s = rs.requestStream({ data: Buffer.from("1000000") }, 5, {
        onNext(p) {
          got.push(str(p.data));
          if (got.length === 5) {
            s.cancel();
            resolve();
          }
        },
        onComplete: resolve,
        onError: reject,
        onExtension() {},
      });
    });
    return [got.join(",") === "0,1,2,3,4", `CANCEL after ${JSON.stringify(got)}`];
  },

  async concurrent_1000(rs) {
    const n = 1000;
    const res = await Promise.all(Array.from({ length: n }, (_, i) => rr(rs, { data: Buffer.from(`r${i}`) })));
    const bad = res.filter((p, i) => str(p && p.data) !== `r${i}`).length;
    return [bad === 0, `${n} request-responses in flight on one connection, ${bad} wrong answers`];
  },

  // The sluice server sends its own requests once the connection is up;
  // this waits until the responder above has answered them.
  async server_requests() {
    await served;
    return [true, `answered the server's request-response ("${seen.rr}") and its request-stream of ${seen.stream} after ${seen.requestN} REQUEST_N`];
  },

  async large_20MiB(rs) {
    const data = Buffer.alloc(LARGE);
    for (let i = 0; i < LARGE; i++) data[i] = (i * 7) & 0xff;
    const p = await rr(rs, { data, metadata: Buffer.from("big") });
    const ok = p && p.data && p.data.equals(data) && str(p.metadata) === "big";
    return [ok, `${LARGE} bytes echoed (rsocket-js requester fragments at 1 MiB, reassembles our fragments)`];
  },
};

function transportFor(url) {
  const u = new URL(url);
  if (u.protocol === "tcp:") {
    // noDelay: Nagle would add ~40 ms to every small write.
    return new TcpClientTransport({ connectionOptions: { host: u.hostname, port: Number(u.port), noDelay: true } });
  }
  if (u.protocol === "ws:") {
    // Node 20 has no global WebSocket; rsocket-js needs a wsCreator.
    return new WebsocketClientTransport({ url, wsCreator: (addr) => new WebSocket(addr, { maxPayload: 64 << 20 }) });
  }
  throw new Error(`URL ${url}: scheme must be tcp or ws`);
}

async function main() {
  const [url, ...only] = process.argv.slice(2);
  const rs = await new RSocketConnector({
    setup: { keepAlive: 10000, lifetime: 60000, dataMimeType: "application/octet-stream", metadataMimeType: "application/octet-stream" },
    fragmentation: { maxOutboundFragmentSize: 1 << 20 },
    transport: transportFor(url),
    responder,
  }).connect();
  let closed = null;
  rs.onClose((e) => (closed = e || new Error("closed")));
  for (const [name, f] of Object.entries(cases)) {
    if (only.length && !only.includes(name)) continue;
    if (closed) {
      report(name, false, `connection closed before the case: ${closed.message}`);
      continue;
    }
    let timer;
    try {
      const timeout = new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no result within ${CASE_TIMEOUT_MS} ms`)), CASE_TIMEOUT_MS);
      });
      const [ok, detail, limitation] = await Promise.race([f(rs), timeout]);
      report(name, ok, detail, limitation);
    } catch (e) {
      report(name, false, `${e.name}: ${e.message}${e.code ? ` (code 0x${e.code.toString(16)})` : ""}`);
    } finally {
      clearTimeout(timer);
    }
  }
  rs.close();
  // Let the close frame go out; the connection's sockets would keep node alive.
  setTimeout(() => process.exit(0), 100).unref();
}

main().catch((e) => {
  process.stderr.write(`client.js: ${e.stack || e}\n`);
  process.exit(1);
});

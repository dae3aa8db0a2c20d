// rsocket-js 1.0.0-alpha.3 echo server for sluice's RSocket client
// (rsocket/interop_js_test.go).
//
// Usage: node server.js tcp|ws
// Listens on 127.0.0.1, any free port. Prints JSON lines on stdout: first
// {"event":"listening","port":N}, then one line per thing only the server
// can observe: {"event":"fnf","data":S}, {"event":"cancel","sent":N},
// {"event":"received","model":M,"size":N,"sha256":H} for payloads over
// 1 MiB, {"event":"send_failed","error":S} when rsocket-js cannot send a
// response, {"event":"connection_closed","error":S}.
// Echo rules mirror `sluice rsocket serve`: request-response echoes data
// and metadata; request-stream with data "n" emits "0".."n-1" within the
// requester's credits; request-channel echoes every inbound payload and
// completes when the requester does; data "error:MSG" fails with
// APPLICATION_ERROR MSG.
"use strict";

const crypto = require("crypto");
const net = require("net");
const { RSocketServer } = require("rsocket-core");
const { TcpServerTransport } = require("rsocket-tcp-server");
const { WebsocketServerTransport } = require("rsocket-websocket-server");
const { WebSocketServer } = require("ws");

const APPLICATION_ERROR = 0x201;

function event(ev) {
  process.stdout.write(JSON.stringify(ev) + "\n");
}

function dataOf(p) {
  return p && p.data ? p.data : Buffer.alloc(0);
}

// observe reports large payloads, so the test can tell that rsocket-js
// reassembled what sluice fragmented even where the echo cannot come back.
function observe(model, p) {
  const d = dataOf(p);
  if (d.length > 1 << 20) {
    event({ event: "received", model, size: d.length, sha256: crypto.createHash("sha256").update(d).digest("hex") });
  }
}

// appError: rsocket-js sends any Error without a .code as APPLICATION_ERROR.
function appError(p) {
  const d = dataOf(p).toString();
  if (!d.startsWith("error:")) {
    return null;
  }
  const e = new Error(d.slice("error:".length));
  e.code = APPLICATION_ERROR;
  return e;
}

// send calls onNext and reports what rsocket-js throws there: its
// responders never fragment, so a response over 16 MiB fails in the frame
// encoder (on TCP, uncaught, it would kill the process).
function send(out, p, complete) {
  try {
    out.onNext(p, complete);
    return true;
  } catch (e) {
    event({ event: "send_failed", error: `${e.name}: ${e.message}` });
    return false;
  }
}

const responder = {
  requestResponse(p, out) {
    observe("request_response", p);
    const err = appError(p);
    // Answer on a later tick, as a real handler would, outside the
    // library's constructor (whose try/catch would swallow a send error).
    setImmediate(() => (err ? out.onError(err) : send(out, { data: dataOf(p), metadata: p.metadata }, true)));
    return { cancel() {}, onExtension() {} };
  },

  fireAndForget(p) {
    event({ event: "fnf", data: dataOf(p).toString() });
    return { cancel() {} };
  },

  // rsocket-js never calls this (it drops METADATA_PUSH, when its decoder
  // does not fail first); kept so a fixed version would report it.
  metadataPush(metadata, out) {
    event({ event: "metadata_push", metadata: metadata ? metadata.toString() : "" });
    if (out) out.onComplete();
  },

  requestStream(p, initialN, out) {
    observe("request_stream", p);
    const err = appError(p);
    const n = Number.parseInt(dataOf(p).toString(), 10);
    let credits = initialN;
    let sent = 0;
    let done = false;
    const pump = () => {
      while (!done && credits > 0 && sent < n) {
        credits--;
        sent++;
        if (!send(out, { data: Buffer.from(String(sent - 1)) }, sent === n)) {
          done = true;
        }
      }
      if (!done && sent === n) {
        done = true; // the last onNext carried the completion
      }
    };
    setImmediate(() => {
      if (err || !Number.isFinite(n) || n < 0) {
        done = true;
        out.onError(err || Object.assign(new Error(`stream data ${JSON.stringify(dataOf(p).toString())} is not a number of elements`), { code: APPLICATION_ERROR }));
        return;
      }
      if (n === 0) {
        done = true;
        out.onComplete();
        return;
      }
      pump();
    });
    return {
      request(k) {
        credits += k;
        setImmediate(pump);
      },
      cancel() {
        done = true;
        event({ event: "cancel", sent });
      },
      onExtension() {},
    };
  },

  requestChannel(p, initialN, isCompleted, out) {
    observe("request_channel", p);
    const err = appError(p);
    const buf = [{ data: dataOf(p), metadata: p.metadata }];
    let credits = initialN;
    let inboundDone = isCompleted;
    let finished = false;
    const pump = () => {
      if (finished) return;
      while (credits > 0 && buf.length > 0) {
        credits--;
        if (!send(out, buf.shift(), false)) {
          finished = true;
          return;
        }
      }
      if (inboundDone && buf.length === 0) {
        finished = true;
        out.onComplete();
      }
    };
    setImmediate(() => {
      if (err) {
        finished = true;
        out.onError(err);
        return;
      }
      // The requester may send only after our REQUEST_N.
      if (!inboundDone) out.request(8);
      pump();
    });
    return {
      // The requester's payloads.
      onNext(q, complete) {
        buf.push({ data: dataOf(q), metadata: q.metadata });
        if (complete) {
          inboundDone = true;
        } else {
          out.request(1);
        }
        pump();
      },
      onComplete() {
        inboundDone = true;
        pump();
      },
      onError() {
        finished = true;
      },
      onExtension() {},
      // The requester's credits for our echoes.
      request(k) {
        credits += k;
        pump();
      },
      cancel() {
        finished = true;
        event({ event: "cancel", sent: -1 });
      },
    };
  },
};

async function main() {
  const kind = process.argv[2];
  // "resume": accept resumable clients (sessions kept 60 s).
  const resume = process.argv[3] === "resume";
  let server;
  let transport;
  if (kind === "tcp") {
    transport = new TcpServerTransport({
      listenOptions: { host: "127.0.0.1", port: 0 },
      // Nagle stays on in rsocket-js unless asked: ~40 ms per REQUEST_N round trip.
      socketCreator: (opts) => (server = new net.Server({ ...opts, noDelay: true })),
    });
  } else if (kind === "ws") {
    transport = new WebsocketServerTransport({
      host: "127.0.0.1",
      port: 0,
      // Node 20 has no WebSocket server; rsocket-js needs one from `ws`.
      wsCreator: (opts) => (server = new WebSocketServer({ ...opts, maxPayload: 64 << 20 })),
    });
  } else {
    throw new Error("usage: node server.js tcp|ws [resume]");
  }
  const rs = new RSocketServer({
    transport,
    resume: resume ? { sessionTimeout: 60000 } : undefined,
    acceptor: {
      accept: async (setup, peer) => {
        peer.onClose((e) => event({ event: "connection_closed", error: e ? `${e.name}: ${e.message}` : "" }));
        return responder;
      },
    },
  });
  await rs.bind();
  event({ event: "listening", port: server.address().port });
}

main().catch((e) => {
  process.stderr.write(`server.js: ${e.stack || e}\n`);
  process.exit(1);
});

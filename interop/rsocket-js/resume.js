// rsocket-js 1.0.0-alpha.3 client with resumption on, for sluice's
// resume interop test (rsocket/resume_js_test.go).
//
// Usage: node resume.js tcp://HOST:PORT|ws://HOST:PORT/PATH N
// Asks a request-stream of N elements ("0".."N-1") on a resumable
// connection (redial every 50 ms) and prints one JSON line:
// {"ok":bool,"detail":S}.
"use strict";

const crypto = require("crypto");
const { RSocketConnector } = require("rsocket-core");
const { TcpClientTransport } = require("rsocket-tcp-client");
const { WebsocketClientTransport } = require("rsocket-websocket-client");
const WebSocket = require("ws");

async function main() {
  const [url, n] = process.argv.slice(2);
  const u = new URL(url);
  const want = Number(n);
  const token = crypto.randomBytes(16);
  const rs = await new RSocketConnector({
    setup: { keepAlive: 10000, lifetime: 60000, dataMimeType: "application/octet-stream", metadataMimeType: "application/octet-stream" },
    transport:
      u.protocol === "ws:"
        ? // Node 20 has no global WebSocket; rsocket-js needs a wsCreator.
          new WebsocketClientTransport({ url, wsCreator: (addr) => new WebSocket(addr) })
        : new TcpClientTransport({ connectionOptions: { host: u.hostname, port: Number(u.port), noDelay: true } }),
    resume: {
      tokenGenerator: () => token,
      reconnectFunction: () => new Promise((resolve) => setTimeout(resolve, 50)),
    },
  }).connect();
  const result = await new Promise((resolve) => {
    let next = 0;
    const timer = setTimeout(() => resolve({ ok: false, detail: `${next} of ${want} elements within 60 s` }), 60000);
    const done = (r) => {
      clearTimeout(timer);
      resolve(r);
    };
    rs.requestStream({ data: Buffer.from(String(want)) }, 2147483647, {
      onNext: (p) => {
        const got = p.data ? p.data.toString() : "";
        if (got !== String(next)) {
          done({ ok: false, detail: `element ${next} is ${got}: lost, reordered or duplicated` });
        }
        next++;
      },
      onComplete: () => done(next === want ? { ok: true, detail: `${want} elements, in order, once` } : { ok: false, detail: `completed after ${next} of ${want}` }),
      onError: (e) => done({ ok: false, detail: `after ${next} elements: ${e.name}: ${e.message}${e.code ? ` (code 0x${e.code.toString(16)})` : ""}` }),
      onExtension() {},
      request() {},
      cancel() {},
    });
  });
  process.stdout.write(JSON.stringify(result) + "\n");
  setTimeout(() => process.exit(0), 100).unref();
  rs.close();
}

main().catch((e) => {
  process.stdout.write(JSON.stringify({ ok: false, detail: `resume.js: ${e.stack || e}` }) + "\n");
  process.exit(1);
});

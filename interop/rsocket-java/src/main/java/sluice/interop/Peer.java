package sluice.interop;

import io.rsocket.Payload;
import io.rsocket.RSocket;
import io.rsocket.SocketAcceptor;
import io.rsocket.core.RSocketConnector;
import io.rsocket.core.RSocketServer;
import io.rsocket.core.Resume;
import io.rsocket.exceptions.ApplicationErrorException;
import io.rsocket.exceptions.RejectedSetupException;
import io.rsocket.transport.ClientTransport;
import io.rsocket.transport.netty.client.TcpClientTransport;
import io.rsocket.transport.netty.client.WebsocketClientTransport;
import io.rsocket.transport.netty.server.CloseableChannel;
import io.rsocket.transport.netty.server.TcpServerTransport;
import io.rsocket.transport.netty.server.WebsocketServerTransport;
import io.rsocket.metadata.AuthMetadataCodec;
import io.rsocket.metadata.CompositeMetadata;
import io.rsocket.metadata.CompositeMetadataCodec;
import io.rsocket.metadata.RoutingMetadata;
import io.rsocket.metadata.TaggingMetadataCodec;
import io.rsocket.metadata.WellKnownMimeType;
import io.rsocket.util.DefaultPayload;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.CompositeByteBuf;
import io.netty.buffer.Unpooled;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.reactivestreams.Publisher;
import org.reactivestreams.Subscription;
import reactor.core.publisher.BaseSubscriber;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * rsocket-java 1.1.5 peer for sluice's interop test (rsocket/interop_java_test.go).
 *
 * <pre>
 * Peer server [resume]     (resume: the TCP and WebSocket servers keep sessions for resumption, 60 s)
 *                          serves the echo rules of `sluice rsocket serve` on TCP and WebSocket
 *                          (127.0.0.1, free ports); prints "LISTEN\ttcp\tPORT", "LISTEN\tws\tPORT",
 *                          then "EVENT\tTRANSPORT\tKIND\tVALUE" for what only a server sees
 *                          (fnf, push, cancel); runs until stdin closes.
 * Peer client TR ADDR ...  TR is tcp (ADDR host:port) or ws (ADDR a ws:// URL); runs every case
 *                          against each and prints "RESULT\tTR\tCASE\tpass|FAIL\tDETAIL" per case.
 * Peer resume-stream TR ADDR N
 *                          connects with resumption on (redial every 50 ms), asks a request-stream
 *                          of N elements ("0".."N-1") and checks them: all, in order, once; prints
 *                          "RESULT\tTR\tresume_stream\tpass|FAIL\tDETAIL".
 * Peer digest-stream ADDR REQUEST
 *                          connects over TCP, asks a request-stream with data REQUEST and prints
 *                          "ELEM\tINDEX\tSIZE\tSHA256(DATA)\tMETADATA" per element, then
 *                          "DONE\tCOUNT" (or "FAIL\tERROR"); the test checks the digests.
 * </pre>
 *
 * Lines are tab-separated so the Go side needs no JSON; details never contain tabs or newlines.
 */
public final class Peer {
  static final Duration CASE_TIMEOUT = Duration.ofSeconds(20);
  static final int LARGE = 20 << 20;
  // Fragment everything over 1 MiB: rsocket-java's WebSocket transport rejects
  // frames over 16 MiB and no frame may exceed 16 MiB on TCP either.
  static final int MTU = 1 << 20;

  static synchronized void out(String... fields) {
    StringBuilder sb = new StringBuilder();
    for (int i = 0; i < fields.length; i++) {
      if (i > 0) sb.append('\t');
      sb.append(fields[i].replace('\t', ' ').replace('\n', ' ').replace('\r', ' '));
    }
    System.out.println(sb);
    System.out.flush();
  }

  public static void main(String[] args) throws Exception {
    if (args.length >= 1 && args[0].equals("server")) {
      server(args.length == 2 && args[1].equals("resume"));
    } else if (args.length >= 3 && args[0].equals("client") && args.length % 2 == 1) {
      clients(args);
      System.exit(0);
    } else if (args.length == 4 && args[0].equals("resume-stream")) {
      try {
        out("RESULT", args[1], "resume_stream", "pass", resumeStream(args[1], args[2], Integer.parseInt(args[3])));
      } catch (Throwable x) {
        out("RESULT", args[1], "resume_stream", "FAIL", x.toString());
      }
      System.exit(0);
    } else if (args.length == 3 && args[0].equals("digest-stream")) {
      try {
        digestStream(args[1], args[2]);
      } catch (Throwable x) {
        out("FAIL", x.toString());
      }
      System.exit(0);
    } else {
      System.err.println("usage: Peer server [resume] | Peer client tcp HOST:PORT|ws URL ... | Peer resume-stream TR ADDR N | Peer digest-stream ADDR REQUEST");
      System.exit(2);
    }
  }

  // ---------- server: the echo responder ----------

  static byte[] bytes(java.nio.ByteBuffer b) {
    byte[] a = new byte[b.remaining()];
    b.duplicate().get(a);
    return a;
  }

  static Payload copy(Payload p) {
    Payload c =
        p.hasMetadata()
            ? DefaultPayload.create(bytes(p.getData()), bytes(p.getMetadata()))
            : DefaultPayload.create(bytes(p.getData()));
    p.release();
    return c;
  }

  static String errorMessage(Payload p) {
    byte[] head = new byte[Math.min(p.getData().remaining(), 4096)];
    p.getData().duplicate().get(head);
    String s = new String(head, StandardCharsets.UTF_8);
    return s.startsWith("error:") ? p.getDataUtf8().substring("error:".length()) : null;
  }

  static RSocket echo(String tr) {
    return new RSocket() {
      @Override
      public Mono<Payload> requestResponse(Payload p) {
        if (p.getDataUtf8().equals("composite")) {
          // Decode the requester's composite metadata with rsocket-java's codecs.
          String d = describe(p.metadata());
          p.release();
          return Mono.just(DefaultPayload.create(d));
        }
        String err = errorMessage(p);
        if (err != null) {
          p.release();
          return Mono.error(new ApplicationErrorException(err));
        }
        return Mono.just(copy(p));
      }

      @Override
      public Mono<Void> fireAndForget(Payload p) {
        out("EVENT", tr, "fnf", p.getDataUtf8());
        p.release();
        return Mono.empty();
      }

      @Override
      public Mono<Void> metadataPush(Payload p) {
        out("EVENT", tr, "push", p.getMetadataUtf8());
        p.release();
        return Mono.empty();
      }

      @Override
      public Flux<Payload> requestStream(Payload p) {
        String err = errorMessage(p);
        if (err != null) {
          p.release();
          return Flux.error(new ApplicationErrorException(err));
        }
        long n = Long.parseLong(p.getDataUtf8().trim());
        p.release();
        AtomicLong sent = new AtomicLong();
        // Flux.range produces only what REQUEST_N allowed, so "sent" shows
        // how far the stream got before a CANCEL.
        return Flux.range(0, (int) n)
            .map(i -> DefaultPayload.create(Integer.toString(i)))
            .doOnNext(x -> sent.incrementAndGet())
            .doOnCancel(() -> out("EVENT", tr, "cancel", Long.toString(sent.get())));
      }

      @Override
      public Flux<Payload> requestChannel(Publisher<Payload> in) {
        // The first element of "in" is the REQUEST_CHANNEL payload itself.
        return Flux.from(in).map(Peer::copy);
      }
    };
  }

  // ---------- composite metadata (rsocket-java writes MIME lengths as length-1) ----------

  static final String LONG_MIME = "application/x." + "a".repeat(128 - "application/x.".length());

  /** The entries both sides encode; describe() of them must equal COMPOSITE_WANT. */
  static final String COMPOSITE_WANT =
      "message/x.rsocket.routing.v0=route:echo.route,v1;"
          + "message/x.rsocket.authentication.v0=simple:user/pass;"
          + "application/x.sluice=custom;"
          + LONG_MIME + "=long;"
          + "text/plain=plain";

  static ByteBuf utf8(String s) {
    return Unpooled.copiedBuffer(s, StandardCharsets.UTF_8);
  }

  static ByteBuf composite() {
    ByteBufAllocator a = ByteBufAllocator.DEFAULT;
    CompositeByteBuf md = a.compositeBuffer();
    CompositeMetadataCodec.encodeAndAddMetadata(md, a, WellKnownMimeType.MESSAGE_RSOCKET_ROUTING,
        TaggingMetadataCodec.createTaggingContent(a, List.of("echo.route", "v1")));
    CompositeMetadataCodec.encodeAndAddMetadata(md, a, WellKnownMimeType.MESSAGE_RSOCKET_AUTHENTICATION,
        AuthMetadataCodec.encodeSimpleMetadata(a, "user".toCharArray(), "pass".toCharArray()));
    CompositeMetadataCodec.encodeAndAddMetadata(md, a, "application/x.sluice", utf8("custom"));
    CompositeMetadataCodec.encodeAndAddMetadata(md, a, LONG_MIME, utf8("long"));
    CompositeMetadataCodec.encodeAndAddMetadata(md, a, WellKnownMimeType.TEXT_PLAIN, utf8("plain"));
    return md;
  }

  static String describe(ByteBuf md) {
    List<String> parts = new ArrayList<>();
    for (CompositeMetadata.Entry e : new CompositeMetadata(md, false)) {
      String mime = e.getMimeType();
      ByteBuf c = e.getContent();
      String v;
      if (WellKnownMimeType.MESSAGE_RSOCKET_ROUTING.getString().equals(mime)) {
        List<String> tags = new ArrayList<>();
        for (String tag : new RoutingMetadata(c)) tags.add(tag);
        v = "route:" + String.join(",", tags);
      } else if (WellKnownMimeType.MESSAGE_RSOCKET_AUTHENTICATION.getString().equals(mime)) {
        // Simple auth by hand: 0x80 (well-known id 0), u16 username length, username, password.
        int t = c.getUnsignedByte(c.readerIndex());
        int n = c.getUnsignedShort(c.readerIndex() + 1);
        String user = c.toString(c.readerIndex() + 3, n, StandardCharsets.UTF_8);
        String pass = c.toString(c.readerIndex() + 3 + n, c.readableBytes() - 3 - n, StandardCharsets.UTF_8);
        v = (t == 0x80 ? "simple:" : "type" + t + ":") + user + "/" + pass;
      } else {
        v = c.toString(StandardCharsets.UTF_8);
      }
      parts.add(mime + "=" + v);
    }
    return String.join(";", parts);
  }

  static String compositeMetadata(RSocket rs) {
    Payload p = rs.requestResponse(DefaultPayload.create(utf8("composite"), composite())).block(CASE_TIMEOUT);
    String got = p.getDataUtf8();
    check(got.equals(COMPOSITE_WANT), "the server decoded " + got);
    return "routing, simple auth, custom MIME (20 and 128 bytes), text/plain: the server (rsocket/extension) decoded all as sent";
  }

  static void server(boolean resume) throws Exception {
    RSocketServer s =
        RSocketServer.create(SocketAcceptor.with(echo("tcp"))).fragment(MTU);
    if (resume) {
      s.resume(new Resume().sessionDuration(Duration.ofSeconds(60)));
    }
    CloseableChannel tcp = s.bind(TcpServerTransport.create("127.0.0.1", 0)).block();
    RSocketServer w = RSocketServer.create(SocketAcceptor.with(echo("ws"))).fragment(MTU);
    if (resume) {
      w.resume(new Resume().sessionDuration(Duration.ofSeconds(60)));
    }
    CloseableChannel ws = w.bind(WebsocketServerTransport.create("127.0.0.1", 0)).block();
    out("LISTEN", "tcp", Integer.toString(tcp.address().getPort()));
    out("LISTEN", "ws", Integer.toString(ws.address().getPort()));
    // The test owns the process: it ends when the test closes stdin.
    while (System.in.read() >= 0) {}
    tcp.dispose();
    ws.dispose();
    System.exit(0);
  }

  // ---------- client: the cases ----------

  interface Case {
    String run(RSocket rs) throws Exception;
  }

  // A dedicated connection per transport checks keepalive: every 100 ms with
  // a 2 s max lifetime, rsocket-java closes it ("No keep-alive acks") unless
  // the server answers. It carries no other traffic: rsocket-java resets its
  // timer on KEEPALIVE answers only, so on a busy connection an answer queued
  // behind a 20 MiB payload on a loaded machine would look like a dead server.
  static final Duration KA_INTERVAL = Duration.ofMillis(100), KA_LIFETIME = Duration.ofSeconds(2);

  static final class Conns {
    RSocket main, ka;
    long kaSince;
  }

  /** A resumable request-stream of n elements through connections that break (resume-stream). */
  static String resumeStream(String tr, String addr, int n) {
    Resume resume =
        new Resume()
            .sessionDuration(Duration.ofSeconds(60))
            .retry(reactor.util.retry.Retry.fixedDelay(Long.MAX_VALUE, Duration.ofMillis(50)));
    RSocket r = RSocketConnector.create().resume(resume).connect(transport(tr, addr)).block(CASE_TIMEOUT);
    AtomicLong next = new AtomicLong();
    List<String> bad = Collections.synchronizedList(new ArrayList<>());
    r.requestStream(DefaultPayload.create(Integer.toString(n)))
        .doOnNext(
            p -> {
              String got = p.getDataUtf8();
              p.release();
              long want = next.getAndIncrement();
              if (bad.isEmpty() && !got.equals(Long.toString(want))) {
                bad.add("element " + want + " is " + got + ": lost, reordered or duplicated");
              }
            })
        .blockLast(Duration.ofSeconds(120));
    r.dispose();
    check(bad.isEmpty(), bad.isEmpty() ? "" : bad.get(0));
    check(next.get() == n, next.get() + " of " + n + " elements");
    return n + " elements, in order, once";
  }

  /** A request-stream whose elements are reported as digests (digest-stream). */
  static void digestStream(String addr, String request) throws Exception {
    RSocket r = RSocketConnector.create().connect(transport("tcp", addr)).block(CASE_TIMEOUT);
    AtomicLong n = new AtomicLong();
    java.security.MessageDigest sha = java.security.MessageDigest.getInstance("SHA-256");
    r.requestStream(DefaultPayload.create(request))
        .doOnNext(
            p -> {
              byte[] d = bytes(p.getData());
              String md = p.hasMetadata() ? p.getMetadataUtf8() : "";
              p.release();
              StringBuilder hex = new StringBuilder();
              for (byte b : sha.digest(d)) hex.append(String.format("%02x", b));
              out("ELEM", Long.toString(n.getAndIncrement()), Integer.toString(d.length), hex.toString(), md);
            })
        .blockLast(Duration.ofSeconds(60));
    r.dispose();
    out("DONE", Long.toString(n.get()));
  }

  static ClientTransport transport(String tr, String addr) {
    if (tr.equals("tcp")) {
      int i = addr.lastIndexOf(':');
      return TcpClientTransport.create(addr.substring(0, i), Integer.parseInt(addr.substring(i + 1)));
    }
    return WebsocketClientTransport.create(URI.create(addr));
  }

  static Conns connect(String tr, String addr) {
    Conns c = new Conns();
    c.main = RSocketConnector.create().fragment(MTU).connect(transport(tr, addr)).block(CASE_TIMEOUT);
    // Warm the JVM up before the connection with the short lifetime exists.
    c.main.requestResponse(DefaultPayload.create("warm-up")).block(CASE_TIMEOUT);
    c.ka =
        RSocketConnector.create()
            .keepAlive(KA_INTERVAL, KA_LIFETIME)
            .connect(transport(tr, addr))
            .block(CASE_TIMEOUT);
    c.kaSince = System.nanoTime();
    return c;
  }

  static final String[] NAMES = {
    "request_response", "fire_and_forget", "metadata_push", "request_stream",
    "request_channel", "error", "cancel", "concurrent_1000", "large_20MiB", "composite_metadata"
  };
  static final Case[] CASES = {
    Peer::requestResponse, Peer::fireAndForget, Peer::metadataPush, Peer::requestStream,
    Peer::requestChannel, Peer::error, Peer::cancel, Peer::concurrent, Peer::large,
    Peer::compositeMetadata
  };

  static void clients(String[] args) {
    // Connect every transport first, so the keepalive connections age while
    // the cases run.
    java.util.Map<String, Conns> conns = new java.util.LinkedHashMap<>();
    java.util.Map<String, String> addrs = new java.util.HashMap<>();
    java.util.Map<String, String> leaseAddrs = new java.util.HashMap<>();
    for (int i = 1; i < args.length; i += 2) {
      if (args[i].endsWith("+lease")) {
        leaseAddrs.put(args[i].substring(0, args[i].length() - "+lease".length()), args[i + 1]);
        continue;
      }
      try {
        addrs.put(args[i], args[i + 1]);
        conns.put(args[i], connect(args[i], args[i + 1]));
      } catch (Throwable e) {
        out("RESULT", args[i], "connect", "FAIL", e.toString());
      }
    }
    for (var e : conns.entrySet()) {
      String tr = e.getKey();
      Conns c = e.getValue();
      for (int i = 0; i < NAMES.length; i++) {
        try {
          out("RESULT", tr, NAMES[i], "pass", CASES[i].run(c.main));
        } catch (Throwable x) {
          out("RESULT", tr, NAMES[i], "FAIL", x.toString());
        }
      }
      try {
        out("RESULT", tr, "keepalive", "pass", keepalive(c));
      } catch (Throwable x) {
        out("RESULT", tr, "keepalive", "FAIL", x.toString());
      }
      if (leaseAddrs.containsKey(tr)) {
        try {
          out("RESULT", tr, "lease", "pass", lease(tr, leaseAddrs.get(tr)));
        } catch (Throwable x) {
          out("RESULT", tr, "lease", "FAIL", x.toString());
        }
      }
      try {
        out("RESULT", tr, "resume_rejected", "pass", resumeRejected(tr, addrs.get(tr)));
      } catch (Throwable x) {
        out("RESULT", tr, "resume_rejected", "FAIL", x.toString());
      }
      c.main.dispose();
      c.ka.dispose();
    }
  }

  static void check(boolean ok, String what) {
    if (!ok) throw new AssertionError(what);
  }

  static String requestResponse(RSocket rs) {
    Payload p = rs.requestResponse(DefaultPayload.create("hello", "meta")).block(CASE_TIMEOUT);
    String d = p.getDataUtf8(), m = p.hasMetadata() ? p.getMetadataUtf8() : null;
    check("hello".equals(d) && "meta".equals(m), "got " + d + "/" + m);
    return "data \"hello\" metadata \"meta\" echoed";
  }

  static String fireAndForget(RSocket rs) {
    rs.fireAndForget(DefaultPayload.create("fnf-from-java")).block(CASE_TIMEOUT);
    return "sent";
  }

  static String metadataPush(RSocket rs) {
    rs.metadataPush(DefaultPayload.create(new byte[0], "push-from-java".getBytes(StandardCharsets.UTF_8)))
        .block(CASE_TIMEOUT);
    return "sent";
  }

  /** Subscribes with REQUEST_N in batches; cancels after cancelAfter elements when > 0. */
  static List<String> batches(RSocket rs, String n, int batch, int cancelAfter) throws Exception {
    CompletableFuture<List<String>> done = new CompletableFuture<>();
    List<String> got = Collections.synchronizedList(new ArrayList<>());
    rs.requestStream(DefaultPayload.create(n))
        .subscribe(
            new BaseSubscriber<Payload>() {
              @Override
              protected void hookOnSubscribe(Subscription s) {
                request(batch);
              }

              @Override
              protected void hookOnNext(Payload p) {
                got.add(p.getDataUtf8());
                p.release();
                if (cancelAfter > 0 && got.size() == cancelAfter) {
                  cancel();
                  done.complete(got);
                } else if (got.size() % batch == 0) {
                  request(batch);
                }
              }

              @Override
              protected void hookOnComplete() {
                done.complete(got);
              }

              @Override
              protected void hookOnError(Throwable t) {
                done.completeExceptionally(t);
              }
            });
    return done.get(CASE_TIMEOUT.toSeconds(), TimeUnit.SECONDS);
  }

  static List<String> seq(int n) {
    List<String> l = new ArrayList<>();
    for (int i = 0; i < n; i++) l.add(Integer.toString(i));
    return l;
  }

  static String requestStream(RSocket rs) throws Exception {
    List<String> got = batches(rs, "100", 3, 0);
    check(got.equals(seq(100)), "got " + got);
    return "100 elements \"0\"..\"99\" with REQUEST_N 3 at a time";
  }

  static String requestChannel(RSocket rs) {
    List<String> got =
        rs.requestChannel(Flux.just("a", "b", "c").map(DefaultPayload::create))
            .map(p -> {
                  String s = p.getDataUtf8();
                  p.release();
                  return s;
                })
            .collectList()
            .block(CASE_TIMEOUT);
    check(got.equals(Arrays.asList("a", "b", "c")), "got " + got);
    return "echoed [a, b, c], completed";
  }

  static String error(RSocket rs) {
    try {
      Payload p = rs.requestResponse(DefaultPayload.create("error:boom")).block(CASE_TIMEOUT);
      throw new AssertionError("no error, got " + p.getDataUtf8());
    } catch (ApplicationErrorException e) {
      check("boom".equals(e.getMessage()), "message " + e.getMessage());
      return "ApplicationErrorException: " + e.getMessage();
    }
  }

  static String cancel(RSocket rs) throws Exception {
    List<String> got = batches(rs, "1000000", 5, 5);
    check(got.equals(seq(5)), "got " + got);
    return "CANCEL after " + got;
  }

  static String concurrent(RSocket rs) {
    Long bad =
        Flux.range(0, 1000)
            .flatMap(
                i ->
                    rs.requestResponse(DefaultPayload.create("r" + i))
                        .map(p -> {
                              boolean ok = p.getDataUtf8().equals("r" + i);
                              p.release();
                              return ok;
                            }),
                1000)
            .filter(ok -> !ok)
            .count()
            .block(CASE_TIMEOUT);
    check(bad == 0, bad + " wrong answers");
    return "1000 request-responses in flight on one connection, all answered";
  }

  static String keepalive(Conns c) throws Exception {
    // The condition under test is elapsed time: two max lifetimes.
    long left = c.kaSince + 2 * KA_LIFETIME.toNanos() + 100_000_000L - System.nanoTime();
    if (left > 0) Thread.sleep(left / 1_000_000 + 1);
    check(!c.ka.isDisposed(), "connection closed");
    Payload p = c.ka.requestResponse(DefaultPayload.create("still")).block(CASE_TIMEOUT);
    check("still".equals(p.getDataUtf8()), "got " + p.getDataUtf8());
    return "rsocket-java client, keepalive 100 ms, max lifetime 2 s: connection alive and answering after 4.1 s";
  }

  /**
   * Lease: the server grants 3 requests per 2 s lease and renews it every
   * second. 6 sequential requests must all be answered: rsocket-java holds
   * the 4th until the next LEASE arrives (a requester that sent it anyway
   * would get REJECTED from our server).
   */
  static String lease(String tr, String addr) {
    RSocket r = RSocketConnector.create().lease().connect(transport(tr, addr)).block(CASE_TIMEOUT);
    try {
      for (int i = 0; i < 6; i++) {
        Payload p = r.requestResponse(DefaultPayload.create("l" + i)).block(CASE_TIMEOUT);
        check(("l" + i).equals(p.getDataUtf8()), "got " + p.getDataUtf8());
      }
      return "6 requests on leases of 3 per 2 s all answered, none REJECTED: rsocket-java waited for the next LEASE";
    } finally {
      r.dispose();
    }
  }

  /**
   * A SETUP with the resume flag against a server without resume: the spec
   * wants ERROR[REJECTED_SETUP] and the connection closed; the requester must
   * see a RejectedSetupException, not a hang (rsocket-java #1121).
   */
  static String resumeRejected(String tr, String addr) {
    try {
      RSocket r = RSocketConnector.create().resume(new Resume()).connect(transport(tr, addr)).block(CASE_TIMEOUT);
      Payload p = r.requestResponse(DefaultPayload.create("resume?")).block(Duration.ofSeconds(10));
      throw new AssertionError("answered " + p.getDataUtf8() + " without resume support");
    } catch (RejectedSetupException e) {
      return "RejectedSetupException: " + e.getMessage();
    } catch (IllegalStateException e) {
      if (e.getMessage() != null && e.getMessage().startsWith("Timeout")) {
        throw new AssertionError("no answer and no error within 10 s: " + e.getMessage());
      }
      throw e;
    }
  }

  static String large(RSocket rs) {
    byte[] data = new byte[LARGE];
    for (int i = 0; i < data.length; i++) data[i] = (byte) (i * 7);
    Payload p =
        rs.requestResponse(DefaultPayload.create(data, "big".getBytes(StandardCharsets.UTF_8)))
            .block(CASE_TIMEOUT);
    byte[] got = bytes(p.getData());
    check(Arrays.equals(got, data) && "big".equals(p.getMetadataUtf8()), "got " + got.length + " bytes");
    return "20 MiB echoed; rsocket-java fragments at 1 MiB";
  }
}

package sink

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	dto "github.com/prometheus/client_model/go"
	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/internal/store/seglogstore"
	"github.com/sluicehq/sluice/internal/storedmsg"
	"github.com/sluicehq/sluice/internal/testkit/sinkclient"
	"github.com/sluicehq/sluice/internal/transport/grpctransport/grpcserve"
)

func TestHandshake(t *testing.T) {
	h := newHarness(t, nil)
	a := h.connect("edge-1", 7)
	w := a.Welcome
	if w.GetCredits().GetMessageLimit() != DefaultQueueMessages || w.GetCredits().GetByteLimit() != DefaultQueueBytes {
		t.Errorf("Welcome credits %v, want the queue capacity %d msgs / %d bytes", w.GetCredits(), DefaultQueueMessages, DefaultQueueBytes)
	}
	if w.GetMaxMessageBytes() != DefaultMaxMessageBytes || w.GetProtocolVersion() != 1 || w.GetSessionId() == "" {
		t.Errorf("Welcome %v", w)
	}
	if len(w.GetDictionaryIds()) != 0 {
		t.Errorf("Welcome lists dictionaries %v the sink does not hold", w.GetDictionaryIds())
	}
	// A newer agent gets the version both speak.
	b := h.open()
	hello := sinkclient.Hello("edge-2")
	hello.GetHello().ProtocolVersion = 9
	b.Send(hello)
	if v := b.Next().GetWelcome().GetProtocolVersion(); v != 1 {
		t.Errorf("Welcome.protocol_version %d for an agent speaking up to 9, want 1", v)
	}
	if id := h.connect("edge-3").Welcome.GetSessionId(); id == w.GetSessionId() {
		t.Error("two streams got the same session id")
	}
}

// TestHandshakeErrors: every bad start ends the stream with a clear status,
// and the sink keeps serving.
func TestHandshakeErrors(t *testing.T) {
	h := newHarness(t, nil)
	long := strings.Repeat("a", 256)
	tests := []struct {
		name  string
		first *sluicev1.Request // nil: close without sending
		code  codes.Code
		msg   string
	}{
		{"message before hello", sinkclient.PlainRequest(1, "a"), codes.InvalidArgument, "must carry a Hello, not plain"},
		{"empty request", &sluicev1.Request{Version: 1}, codes.InvalidArgument, "not no payload"},
		{"no agent id", sinkclient.Hello(""), codes.InvalidArgument, "agent_id of 0 bytes"},
		{"agent id too long", sinkclient.Hello(long), codes.InvalidArgument, "agent_id of 256 bytes"},
		{"request version", func() *sluicev1.Request { r := sinkclient.Hello("a"); r.Version = 2; return r }(), codes.InvalidArgument, "Request.version 2"},
		{"protocol version 0", func() *sluicev1.Request { r := sinkclient.Hello("a"); r.GetHello().ProtocolVersion = 0; return r }(), codes.InvalidArgument, "protocol version 0"},
		{"closed before hello", nil, codes.InvalidArgument, "closed before its Hello"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := h.open()
			if tt.first != nil {
				a.Send(tt.first)
			} else if err := a.Stream.CloseSend(); err != nil {
				t.Fatal(err)
			}
			err := a.Status()
			if status.Code(err) != tt.code || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("stream ended with %v, want %v containing %q", err, tt.code, tt.msg)
			}
		})
	}
	// Still serving.
	a := h.connect("edge-1")
	a.Send(sinkclient.PlainRequest(0, "ok"))
	a.Collect(0)
}

func TestSecondHello(t *testing.T) {
	h := newHarness(t, nil)
	a := h.connect("edge-1")
	a.Send(sinkclient.PlainRequest(0, "a"))
	a.Collect(0)
	a.Send(sinkclient.Hello("edge-1"))
	if err := a.Status(); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "second Hello") {
		t.Fatalf("second Hello: %v", err)
	}
}

// TestAckAfterStore: when an ack arrives, the message is already readable
// in the store (Append returned, so it was fdatasync'ed).
func TestAckAfterStore(t *testing.T) {
	h := newHarness(t, nil)
	a := h.connect("edge-1")
	const n = 200
	for id := range uint64(n) {
		a.Send(sinkclient.PlainRequest(id, sinkclient.Records(id, 3)...))
	}
	acked := map[uint64]bool{}
	for len(acked) < n {
		r := a.Next()
		ack := r.GetAck()
		if ack == nil {
			continue
		}
		in := map[string]bool{}
		for _, k := range h.stored() {
			in[k] = true
		}
		for _, rg := range ack.Ranges {
			if rg.First > rg.Last {
				t.Fatalf("ill-formed range %v", rg)
			}
			for id := rg.First; id <= rg.Last; id++ {
				if !in["edge-1/"+itoa(id)] {
					t.Fatalf("message %d acked before it is in the store", id)
				}
				acked[id] = true
			}
		}
	}
	if got := len(h.stored()); got != n {
		t.Fatalf("store holds %d messages, want %d", got, n)
	}
}

// TestCredits holds the storage writer so that the queue fills: a message
// beyond the byte credit (the empty-pipe waiver a Sender may claim) is
// rejected as retryable, and acks release credit. (Sending with no credit
// at all ends the stream: TestOutOfWindow.)
func TestCredits(t *testing.T) {
	hold := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(hold) }) }
	h := newHarness(t, func(c *Config) {
		c.QueueMessages = 4
		c.QueueBytes = 1 << 10
		c.beforeCommit = func() { <-hold }
	})
	t.Cleanup(release)
	a := h.connect("edge-1")
	if got := a.Welcome.GetCredits().GetMessageLimit(); got != 4 {
		t.Fatalf("Welcome message credit %d, want 4", got)
	}
	big := strings.Repeat("x", 600)
	a.Send(sinkclient.PlainRequest(0, big)) // into the empty queue
	a.Send(sinkclient.PlainRequest(1, big)) // beyond the byte credit
	e, cr := a.ErrorFor(1)
	if e.Code != sluicev1.ErrorCode_ERROR_CODE_OVER_CREDIT || !e.Retryable {
		t.Fatalf("over-credit message: %v, want a retryable OVER_CREDIT", e)
	}
	// The rejected message's credit is handed back: 2 received, 1 queued.
	if cr.GetMessageLimit() != 5 {
		t.Fatalf("credits after the rejection %v, want message limit 5", cr)
	}
	for id := uint64(2); id <= 4; id++ {
		a.Send(sinkclient.PlainRequest(id, "r"))
	}
	a.None(quiet) // nothing acked while the writer is held
	release()
	infos := a.Collect(0, 2, 3, 4)
	var limit uint64
	for _, in := range infos {
		limit = max(limit, in.GetCredits().GetMessageLimit())
	}
	for limit < 9 {
		limit = max(limit, a.Next().GetInfo().GetCredits().GetMessageLimit())
	}
	if limit != 9 {
		t.Fatalf("credits after the acks: message limit %d, want 9 (5 received + 4 free)", limit)
	}
	a.Send(sinkclient.PlainRequest(1, big))
	a.Collect(1)
	if got := h.stored(); len(got) != 5 {
		t.Fatalf("store holds %v", got)
	}
}

// TestDuplicates: a message sent again is acked and stored once, on the
// same stream, on a new one, and after sink restarts (with a final
// checkpoint, an older one, and none).
func TestDuplicates(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.CheckpointBytes = 1 }) // checkpoint after every commit
	a := h.connect("edge-1")
	for id := range uint64(5) {
		a.Send(sinkclient.PlainRequest(id, "r"))
		a.Collect(id)
	}
	a.Send(sinkclient.PlainRequest(2, "r"))
	a.Collect(2)
	ckpt := filepath.Join(h.cfg.DataDir, seglogstore.CheckpointName)
	old, err := os.ReadFile(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	b := h.connect("edge-1")
	for id := range uint64(10) {
		b.Send(sinkclient.PlainRequest(id, "r"))
	}
	b.Collect(0, 1, 2, 3, 4, 5, 6, 7, 8, 9)
	// Another agent's ids are its own.
	c := h.connect("edge-2")
	c.Send(sinkclient.PlainRequest(3, "r"))
	c.Collect(3)
	want := []string{"edge-1/0", "edge-1/1", "edge-1/2", "edge-1/3", "edge-1/4", "edge-1/5", "edge-1/6", "edge-1/7", "edge-1/8", "edge-1/9", "edge-2/3"}
	if got := h.stored(); !slices.Equal(got, want) {
		t.Fatalf("store %v, want %v", got, want)
	}

	resend := func(name string) {
		t.Helper()
		a := h.connect("edge-1")
		for id := range uint64(10) {
			a.Send(sinkclient.PlainRequest(id, "r"))
		}
		a.Collect(0, 1, 2, 3, 4, 5, 6, 7, 8, 9)
		c := h.connect("edge-2")
		c.Send(sinkclient.PlainRequest(3, "r"))
		c.Collect(3)
		if got := h.stored(); !slices.Equal(got, want) {
			t.Fatalf("%s: store %v, want %v", name, got, want)
		}
	}
	h.restart()
	resend("after restart")

	// An old checkpoint: the restart scans the store from its offset.
	h.stop()
	if err := os.WriteFile(ckpt, old, 0o644); err != nil {
		t.Fatal(err)
	}
	h.start()
	resend("after restart from an old checkpoint")

	// No checkpoint (a crash before the first one): a full scan.
	h.stop()
	if err := os.Remove(ckpt); err != nil {
		t.Fatal(err)
	}
	h.start()
	resend("after restart without checkpoint")

	// A damaged checkpoint is ignored with a warning, not trusted.
	h.stop()
	if err := os.WriteFile(ckpt, []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	h.start()
	resend("after restart with a damaged checkpoint")
	if !strings.Contains(h.logs.String(), "dedup checkpoint") {
		t.Error("no warning about the damaged checkpoint")
	}

	want = append(want, "edge-1/10")
	a = h.connect("edge-1")
	a.Send(sinkclient.PlainRequest(10, "r"))
	a.Collect(10)
	if got := h.stored(); !slices.Equal(got, want) {
		t.Fatalf("store %v, want %v", got, want)
	}
}

// TestRejections: every kind of invalid message gets a clear, non-retryable
// (or, for an unknown dictionary, retryable) error, its credit back, and a
// log line; nothing is stored; the stream and the sink keep working.
func TestRejections(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxMessageBytes = 64 << 10 })
	enc := codec.NewEncoder(codec.LevelFastest)
	zstd := func(body []byte) []byte {
		out, err := enc.Encode(nil, body, codec.Zstd, 0)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	big := sinkclient.Body(strings.Repeat("z", 100<<10)) // compresses to far under 64 KiB
	small := sinkclient.Body("a", "b")
	corrupt := zstd(small)
	corrupt[len(corrupt)-6] ^= 0xFF
	tests := []struct {
		name      string
		req       *sluicev1.Request
		code      sluicev1.ErrorCode
		retryable bool
		detail    string
	}{
		{"unknown version", &sluicev1.Request{Version: 2, MessageId: 1, RecordCount: 2, Payload: &sluicev1.Request_Plain{Plain: small}},
			sluicev1.ErrorCode_ERROR_CODE_BAD_PAYLOAD, false, "Request.version 2"},
		{"no payload", &sluicev1.Request{Version: 1, MessageId: 2},
			sluicev1.ErrorCode_ERROR_CODE_BAD_PAYLOAD, false, "without a payload"},
		{"oversize plain", &sluicev1.Request{Version: 1, MessageId: 3, RecordCount: 1, Payload: &sluicev1.Request_Plain{Plain: big}},
			sluicev1.ErrorCode_ERROR_CODE_OVERSIZE, false, "exceeds max_message_bytes"},
		{"oversize once decompressed", &sluicev1.Request{Version: 1, MessageId: 4, RecordCount: 1, Payload: &sluicev1.Request_Zstd{Zstd: zstd(big)}},
			sluicev1.ErrorCode_ERROR_CODE_OVERSIZE, false, "decompresses to more than"},
		{"corrupt zstd", &sluicev1.Request{Version: 1, MessageId: 5, RecordCount: 2, Payload: &sluicev1.Request_Zstd{Zstd: corrupt}},
			sluicev1.ErrorCode_ERROR_CODE_BAD_PAYLOAD, false, "does not decompress"},
		{"not zstd", &sluicev1.Request{Version: 1, MessageId: 6, RecordCount: 2, Payload: &sluicev1.Request_Zstd{Zstd: small}},
			sluicev1.ErrorCode_ERROR_CODE_BAD_PAYLOAD, false, "does not decompress"},
		{"malformed batch", &sluicev1.Request{Version: 1, MessageId: 7, RecordCount: 1, Payload: &sluicev1.Request_Plain{Plain: []byte("hello")}},
			sluicev1.ErrorCode_ERROR_CODE_BAD_PAYLOAD, false, "not a valid batch"},
		{"malformed batch in zstd", &sluicev1.Request{Version: 1, MessageId: 8, RecordCount: 1, Payload: &sluicev1.Request_Zstd{Zstd: zstd([]byte("hello"))}},
			sluicev1.ErrorCode_ERROR_CODE_BAD_PAYLOAD, false, "not a valid batch"},
		{"empty plain", &sluicev1.Request{Version: 1, MessageId: 9, Payload: &sluicev1.Request_Plain{}},
			sluicev1.ErrorCode_ERROR_CODE_BAD_PAYLOAD, false, "not a valid batch"},
		{"record count", &sluicev1.Request{Version: 1, MessageId: 10, RecordCount: 3, Payload: &sluicev1.Request_Plain{Plain: small}},
			sluicev1.ErrorCode_ERROR_CODE_BAD_PAYLOAD, false, "record_count 3, but the batch holds 2"},
		{"unknown dictionary", &sluicev1.Request{Version: 1, MessageId: 11, RecordCount: 2, Payload: &sluicev1.Request_ZstdDict{ZstdDict: &sluicev1.ZstdDict{DictionaryId: 40000, Data: corrupt}}},
			sluicev1.ErrorCode_ERROR_CODE_UNKNOWN_DICTIONARY, true, "dictionary 40000 is not known"},
		{"dictionary id 0", &sluicev1.Request{Version: 1, MessageId: 12, RecordCount: 2, Payload: &sluicev1.Request_ZstdDict{ZstdDict: &sluicev1.ZstdDict{Data: corrupt}}},
			sluicev1.ErrorCode_ERROR_CODE_BAD_PAYLOAD, false, "dictionary_id 0"},
	}
	a := h.connect("edge-1")
	limit := a.Welcome.GetCredits().GetMessageLimit()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a.Send(tt.req)
			e, cr := a.ErrorFor(tt.req.MessageId)
			if e.Code != tt.code || e.Retryable != tt.retryable || !strings.Contains(e.Detail, tt.detail) {
				t.Fatalf("error %v, want %v retryable=%v containing %q", e, tt.code, tt.retryable, tt.detail)
			}
			limit++
			if cr.GetMessageLimit() != limit {
				t.Fatalf("credits with the error %v, want message limit %d (the credit handed back)", cr, limit)
			}
			// The first rejection of a session is logged; the others
			// within the minute are counted in the next line's
			// not_logged_since (TestRejectedLogRateLimited).
			if first := tests[0].req.MessageId; !strings.Contains(h.logs.String(), "message_id="+itoa(first)) {
				t.Fatalf("no log line about message %d, the session's first rejection", first)
			}
		})
	}
	if got := h.stored(); len(got) != 0 {
		t.Fatalf("invalid messages were stored: %v", got)
	}
	a.Send(sinkclient.PlainRequest(100, "fine"))
	a.Collect(100)
	if got := h.stored(); !slices.Equal(got, []string{"edge-1/100"}) {
		t.Fatalf("store %v", got)
	}
}

// trainDict trains a small dictionary on records like those sinkclient.Records()
// makes.
func trainDict(t *testing.T) codec.Dictionary {
	t.Helper()
	var samples [][]byte
	for i := range uint64(300) {
		samples = append(samples, sinkclient.Body(sinkclient.Records(i, 1+int(i%5))...))
	}
	d, err := codec.Train(samples, 4<<10)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func dictUpload(d codec.Dictionary) *sluicev1.Request {
	return &sluicev1.Request{Version: 1, Payload: &sluicev1.Request_Dictionary{Dictionary: &sluicev1.Dictionary{Id: d.ID, Data: d.Data}}}
}

// TestDictionaries: an upload is stored durably and announced; messages
// using it are accepted on this and later streams, also after a restart;
// Welcome lists it; a bad upload ends the stream.
func TestDictionaries(t *testing.T) {
	h := newHarness(t, nil)
	d := trainDict(t)
	enc := codec.NewEncoder(codec.LevelDefault)
	if err := enc.AddDictionary(d); err != nil {
		t.Fatal(err)
	}
	dictReq := func(id uint64) *sluicev1.Request {
		recs := sinkclient.Records(id, 4)
		data, err := enc.Encode(nil, sinkclient.Body(recs...), codec.ZstdDict, d.ID)
		if err != nil {
			t.Fatal(err)
		}
		return &sluicev1.Request{Version: 1, MessageId: id, RecordCount: 4,
			Payload: &sluicev1.Request_ZstdDict{ZstdDict: &sluicev1.ZstdDict{DictionaryId: d.ID, Data: data}}}
	}
	a := h.connect("edge-1", d.ID)
	if len(a.Welcome.GetDictionaryIds()) != 0 {
		t.Fatalf("Welcome lists %v before any upload", a.Welcome.GetDictionaryIds())
	}
	// Upload, then use at once: the sink handles them in order.
	a.Send(dictUpload(d))
	a.Send(dictReq(0))
	infos := a.Collect(0)
	announced := false
	for _, in := range infos {
		announced = announced || slices.Contains(in.GetDictionaryIds(), d.ID)
	}
	if !announced {
		t.Fatalf("upload not announced; saw %v", infos)
	}
	if _, err := os.Stat(filepath.Join(h.cfg.DataDir, "dicts", "edge-1", itoa(uint64(d.ID))+".zdict")); err != nil {
		t.Fatalf("dictionary not stored: %v", err)
	}
	// Uploading the same dictionary again is harmless.
	a.Send(dictUpload(d))
	a.Send(dictReq(1))
	a.Collect(1)

	// Another agent cannot use edge-1's dictionary.
	b := h.connect("edge-2", d.ID)
	if len(b.Welcome.GetDictionaryIds()) != 0 {
		t.Fatalf("edge-2 is told it holds %v", b.Welcome.GetDictionaryIds())
	}
	b.Send(dictReq(0))
	if e, _ := b.ErrorFor(0); e.Code != sluicev1.ErrorCode_ERROR_CODE_UNKNOWN_DICTIONARY || !e.Retryable {
		t.Fatalf("edge-2 using edge-1's dictionary: %v", e)
	}

	h.restart()
	c := h.connect("edge-1", 12345, d.ID)
	if got := c.Welcome.GetDictionaryIds(); !slices.Equal(got, []uint32{d.ID}) {
		t.Fatalf("Welcome after restart lists %v, want [%d]", got, d.ID)
	}
	c.Send(dictReq(2))
	c.Collect(2)
	msgs := readAll(t, h, 0)
	if len(msgs) != 3 {
		t.Fatalf("read %d messages, want 3", len(msgs))
	}
	for i, m := range msgs {
		if want := sinkclient.Records(uint64(i), 4); !slices.Equal(strs(m.Records), want) {
			t.Fatalf("message %d read back as %q, want %q", i, m.Records, want)
		}
	}

	// Bad uploads end the stream.
	bad := []struct {
		name string
		req  *sluicev1.Request
		msg  string
	}{
		{"not a dictionary", &sluicev1.Request{Version: 1, Payload: &sluicev1.Request_Dictionary{Dictionary: &sluicev1.Dictionary{Id: 5, Data: []byte("nope nope nope")}}}, "dictionary 5"},
		{"id mismatch", &sluicev1.Request{Version: 1, Payload: &sluicev1.Request_Dictionary{Dictionary: &sluicev1.Dictionary{Id: d.ID + 1, Data: d.Data}}}, "has id"},
		{"id 0", &sluicev1.Request{Version: 1, Payload: &sluicev1.Request_Dictionary{Dictionary: &sluicev1.Dictionary{Data: d.Data}}}, "id 0"},
	}
	for _, tt := range bad {
		a := h.connect("edge-1")
		a.Send(tt.req)
		if err := a.Status(); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
	// A different dictionary under a used id is refused.
	other := trainOther(t, d.ID)
	a = h.connect("edge-1")
	a.Send(dictUpload(other))
	if err := a.Status(); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "different bytes") {
		t.Errorf("conflicting upload: %v", err)
	}
}

// trainOther trains a dictionary on other data and gives it the id id.
func trainOther(t *testing.T, id uint32) codec.Dictionary {
	t.Helper()
	var samples [][]byte
	for i := range 300 {
		samples = append(samples, sinkclient.Body(fmt.Sprintf(`{"level":"warn","n":%d,"host":"h%d"}`, i, i%13)))
	}
	d, err := codec.Train(samples, 4<<10)
	if err != nil {
		t.Fatal(err)
	}
	d.Data = bytes.Clone(d.Data)
	d.Data[4], d.Data[5], d.Data[6], d.Data[7] = byte(id), byte(id>>8), byte(id>>16), byte(id>>24)
	d.ID = id
	return d
}

func strs(b [][]byte) []string {
	out := make([]string, len(b))
	for i, r := range b {
		out[i] = string(r)
	}
	return out
}

// TestCompressedRoundTrip: zstd messages stay compressed in the store and
// read back decompressed.
func TestCompressedRoundTrip(t *testing.T) {
	h := newHarness(t, nil)
	enc := codec.NewEncoder(codec.LevelDefault)
	a := h.connect("edge-1")
	body := sinkclient.Body(sinkclient.Records(0, 50)...)
	z, err := enc.Encode(nil, body, codec.Zstd, 0)
	if err != nil {
		t.Fatal(err)
	}
	a.Send(&sluicev1.Request{Version: 1, MessageId: 0, RecordCount: 50, Payload: &sluicev1.Request_Zstd{Zstd: z}})
	a.Collect(0)
	it := h.s.Store().NewIterator(0, 1<<20)
	if !it.Next() {
		t.Fatal(it.Err())
	}
	m, err := storedmsg.Decode(it.Value())
	if err != nil || m.Codec != codec.Zstd || !bytes.Equal(m.Body, z) || m.RecordCount != 50 {
		t.Fatalf("stored %+v, %v; want the zstd frame as received", m, err)
	}
	msgs := readAll(t, h, 0)
	if len(msgs) != 1 || !slices.Equal(strs(msgs[0].Records), sinkclient.Records(0, 50)) {
		t.Fatalf("read back %v", msgs)
	}
}

// TestManyStreams runs several agents at once through the one writer.
func TestManyStreams(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.QueueMessages = 8 })
	const agents, perAgent = 6, 150
	var wg sync.WaitGroup
	errs := make(chan error, agents)
	for i := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := h.connect("agent-" + itoa(uint64(i)))
			// Stay within credits, as an agent must.
			limit, next, acked := a.Welcome.GetCredits().GetMessageLimit(), uint64(0), 0
			sent := uint64(0)
			for acked < perAgent {
				for next < perAgent && sent < limit {
					if err := a.Stream.Send(sinkclient.PlainRequest(next, sinkclient.Records(next, 2)...)); err != nil {
						errs <- err
						return
					}
					next++
					sent++
				}
				r, ok := <-a.Resps
				if !ok {
					errs <- <-a.End
					return
				}
				if c := r.GetInfo().GetCredits(); c != nil {
					limit = max(limit, c.MessageLimit)
				}
				if e := r.GetInfo().GetError(); e != nil {
					errs <- fmt.Errorf("agent %d: %v", i, e)
					return
				}
				for _, rg := range r.GetAck().GetRanges() {
					acked += int(rg.Last - rg.First + 1)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := len(h.stored()); got != agents*perAgent {
		t.Fatalf("store holds %d messages, want %d", got, agents*perAgent)
	}
}

// TestStoreFailure: when the store fails, the streams whose messages were
// in the failed commit end with Unavailable (their agents resend), and
// nothing is acked.
func TestStoreFailure(t *testing.T) {
	h := newHarness(t, nil)
	a := h.connect("edge-1")
	a.Send(sinkclient.PlainRequest(0, "a"))
	a.Collect(0)
	if err := h.s.seg.Close(); err != nil {
		t.Fatal(err)
	}
	a.Send(sinkclient.PlainRequest(1, "b"))
	err := a.Status()
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "store failed") {
		t.Fatalf("stream ended with %v, want Unavailable", err)
	}
}

// TestClose: Close ends open streams with Unavailable after acking what
// they queued, and everything acked is in the store after a restart.
func TestClose(t *testing.T) {
	h := newHarness(t, nil)
	a := h.connect("edge-1")
	for id := range uint64(20) {
		a.Send(sinkclient.PlainRequest(id, "r"))
	}
	a.Collect(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19)
	done := make(chan error, 1)
	go func() { done <- h.s.Close() }()
	if err := a.Status(); status.Code(err) != codes.Unavailable {
		t.Fatalf("stream ended with %v at Close, want Unavailable", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	h.start()
	if got := len(h.stored()); got != 20 {
		t.Fatalf("%d messages after restart, want 20", got)
	}
	// Serve after Close returns at once.
	s := h.s
	s.Close()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := grpcserve.Serve(s.Serving(), lis); err != nil {
		t.Fatalf("Serve after Close: %v", err)
	}
}

// TestAgentCloseSend: an agent that closes its side gets its acks, then an
// OK status.
func TestAgentCloseSend(t *testing.T) {
	h := newHarness(t, nil)
	a := h.connect("edge-1")
	for id := range uint64(10) {
		a.Send(sinkclient.PlainRequest(id, "r"))
	}
	if err := a.Stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	a.Collect(0, 1, 2, 3, 4, 5, 6, 7, 8, 9)
	if err := a.Status(); err != nil {
		t.Fatalf("stream ended with %v, want OK", err)
	}
}

// TestGarbage sends random payloads of every kind: each is rejected, none
// is stored, nothing panics, and the stream carries on.
func TestGarbage(t *testing.T) {
	h := newHarness(t, nil)
	a := h.connect("edge-1")
	rng := rand.New(rand.NewPCG(7, 7))
	magic := []byte{0x28, 0xB5, 0x2F, 0xFD}
	for id := range uint64(300) {
		data := make([]byte, rng.IntN(200))
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		if id%2 == 0 {
			data = append(slices.Clone(magic), data...)
		}
		req := &sluicev1.Request{Version: 1, MessageId: id, RecordCount: uint32(rng.IntN(3))}
		switch id % 3 {
		case 0:
			req.Payload = &sluicev1.Request_Plain{Plain: data}
		case 1:
			req.Payload = &sluicev1.Request_Zstd{Zstd: data}
		case 2:
			req.Payload = &sluicev1.Request_ZstdDict{ZstdDict: &sluicev1.ZstdDict{DictionaryId: uint32(rng.IntN(2)), Data: data}}
		}
		a.Send(req)
	}
	for id := range uint64(300) {
		if e, _ := a.ErrorFor(id); e.Code == sluicev1.ErrorCode_ERROR_CODE_UNSPECIFIED {
			t.Fatalf("message %d: %v", id, e)
		}
	}
	a.Send(sinkclient.PlainRequest(1000, "fine"))
	a.Collect(1000)
	if got := h.stored(); !slices.Equal(got, []string{"edge-1/1000"}) {
		t.Fatalf("store %v", got)
	}
}

// TestRejectedLogRateLimited: a session's rejections are logged at most
// once a minute, the next line saying how many it left out, while
// sluice_sink_rejected_total counts each. Before, a line per rejection: an
// agent re-offers every message refused for good at each session, 329
// lines per session in the case found by hand (2026-11-29).
func TestRejectedLogRateLimited(t *testing.T) {
	h := newHarness(t, nil)
	a := h.connect("edge-1")
	for id := uint64(1); id <= 20; id++ {
		a.Send(&sluicev1.Request{Version: 1, MessageId: id}) // no payload: refused for good
		if e, _ := a.ErrorFor(id); e.Code != sluicev1.ErrorCode_ERROR_CODE_BAD_PAYLOAD {
			t.Fatalf("message %d: %v", id, e)
		}
	}
	if n := strings.Count(h.logs.String(), "message rejected"); n != 1 {
		t.Fatalf("%d lines for 20 rejections in a minute, want 1", n)
	}
	var m dto.Metric
	if err := h.s.m.rejected.WithLabelValues(reasonNoPayload).Write(&m); err != nil || m.GetCounter().GetValue() != 20 {
		t.Fatalf("rejected_total %v (%v), want 20", m.GetCounter().GetValue(), err)
	}
}

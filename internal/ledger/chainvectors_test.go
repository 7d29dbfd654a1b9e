package ledger

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cyberphone/json-canonicalization/go/src/webpki.org/jsoncanonicalizer"
)

var updateVectors = flag.Bool("update", false, "rewrite docs/contract/chain-vectors.json from vectorCases")

const vectorsPath = "../../docs/contract/chain-vectors.json"

// vectorFile is docs/contract/chain-vectors.json: what foreign writers check their entry ids
// against.
type vectorFile struct {
	Description string   `json:"description"`
	Vectors     []vector `json:"vectors"`
}

type vector struct {
	Name      string         `json:"name"`
	Task      string         `json:"task"`
	Chain     string         `json:"chain"`
	Prev      string         `json:"prev"`
	WrittenAt string         `json:"written_at"` // the time as a writer holds it, any precision
	CreatedAt string         `json:"created_at"` // as hashed: microseconds, six digits
	Payload   map[string]any `json:"payload"`
	Canonical string         `json:"canonical"`
	ID        string         `json:"id"`
}

const prevID = "5f2b1e0c3a9d4f6e8b7a1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f"

// vectorCases are the inputs; -update computes the rest. Each is a case a foreign writer could
// get wrong: trailing zeros, a whole second, a millisecond or nanosecond clock, strings JSON
// libraries escape differently, keys whose UTF-16 order differs from their code point order.
var vectorCases = []vector{
	{Name: "enqueue: first status entry, whole second", Task: "t-1", Chain: ChainStatuses, Prev: "",
		WrittenAt: "2026-12-01T18:27:45Z", Payload: map[string]any{"status": "new"}},
	{Name: "claim: status with trailing zero microseconds", Task: "t-1", Chain: ChainStatuses, Prev: prevID,
		WrittenAt: "2026-12-01T18:27:45.907880Z", Payload: map[string]any{"status": "working", "worker_id": "w-1"}},
	{Name: "claim: first heartbeat, a millisecond clock", Task: "t-1", Chain: ChainHeartbeats, Prev: "",
		WrittenAt: "2026-12-01T18:27:45.907Z", Payload: map[string]any{"claim": true, "worker_id": "w-1"}},
	{Name: "heartbeat: a nanosecond clock, truncated not rounded", Task: "t-1", Chain: ChainHeartbeats, Prev: prevID,
		WrittenAt: "2026-12-01T18:27:46.123456999Z", Payload: map[string]any{"worker_id": "w-1"}},
	{Name: "heartbeat: a writer's local offset, hashed in UTC", Task: "t-1", Chain: ChainHeartbeats, Prev: prevID,
		WrittenAt: "2026-12-01T19:27:47.5+01:00", Payload: map[string]any{"worker_id": "w-1"}},
	{Name: "report: characters encoding/json escapes", Task: "t-1", Chain: ChainReports, Prev: "",
		WrittenAt: "2026-12-01T18:27:48.010000Z", Payload: map[string]any{"body": "ops<&> a\u2028b\u2029c", "worker_id": "w<1>&"}},
	{Name: "report: non-ASCII and an astral character", Task: "tâche-é日本", Chain: ChainReports, Prev: prevID,
		WrittenAt: "2026-12-01T18:27:49.000001Z", Payload: map[string]any{"body": "naïve – 日本語 😀", "worker_id": "wörker"}},
	{Name: "report: quotes, backslash, control characters and DEL", Task: "t-1", Chain: ChainReports, Prev: prevID,
		WrittenAt: "2026-12-01T18:27:50.5Z", Payload: map[string]any{"body": "say \"hi\"\\ \b\f\n\r\t \u0001\u001f \u007f /", "worker_id": "w-1"}},
	{Name: "report: keys in UTF-16 order, not code point order", Task: "t-1", Chain: ChainReports, Prev: prevID,
		WrittenAt: "2026-12-01T18:27:51Z", Payload: map[string]any{"body": "x", "worker_id": "w-1", "\uFB01": "fi ligature", "😀": "astral", "€": "euro"}},
	{Name: "complete: done", Task: "t-1", Chain: ChainStatuses, Prev: prevID,
		WrittenAt: "2026-12-01T18:28:00.100000Z", Payload: map[string]any{"status": "done", "worker_id": "w-1"}},
	{Name: "fail: a reason", Task: "t-2", Chain: ChainStatuses, Prev: prevID,
		WrittenAt: "2026-12-01T18:28:01.250Z", Payload: map[string]any{"reason": "exit 1: <stderr> & \"more\"", "status": "failed", "worker_id": "w-2"}},
	{Name: "reclaim: the sweep's preempt heartbeat", Task: "t-3", Chain: ChainHeartbeats, Prev: prevID,
		WrittenAt: "2026-12-01T18:30:00.000042Z", Payload: map[string]any{"preempt": true, "reclaimer": "ops<&>"}},
	{Name: "reclaim: the requeue status, an integer count", Task: "t-3", Chain: ChainStatuses, Prev: prevID,
		WrittenAt: "2026-12-01T18:30:00.000042Z", Payload: map[string]any{"reclaim_count": 1, "reclaimed": true, "reclaimer": "ops<&>", "status": "new"}},
	{Name: "reclaim: a poison task failed", Task: "t-3", Chain: ChainStatuses, Prev: prevID,
		WrittenAt: "2026-12-01T18:40:00Z", Payload: map[string]any{"reason": "reclaimed 4 times (more than 3): a poison task, failed instead of requeued", "reclaim_count": 4, "reclaimed": true, "reclaimer": "stalesweep", "status": "failed"}},
}

// TestChainEntryIDsMatchTheVectors holds the product to docs/contract/chain-vectors.json, and
// the file to RFC 8785 as an independent implementation (the RFC author's own Go canonicalizer)
// computes it: the encoding foreign writers are told to implement is the one the code uses.
func TestChainEntryIDsMatchTheVectors(t *testing.T) {
	if *updateVectors {
		writeVectors(t)
	}
	raw, err := os.ReadFile(vectorsPath)
	if err != nil {
		t.Fatal(err)
	}
	var f vectorFile
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // integers stay integers
	if err := dec.Decode(&f); err != nil {
		t.Fatal(err)
	}
	names := func(vs []vector) []string {
		var out []string
		for _, v := range vs {
			out = append(out, v.Name)
		}
		return out
	}
	if !slices.Equal(names(f.Vectors), names(vectorCases)) {
		t.Fatalf("the file's vectors %q are not the cases %q: run go test ./internal/ledger -run Vectors -update", names(f.Vectors), names(vectorCases))
	}
	for _, v := range f.Vectors {
		at, err := time.Parse(time.RFC3339Nano, v.WrittenAt)
		if err != nil {
			t.Fatalf("%s: written_at: %v", v.Name, err)
		}
		got, err := EntryID(v.Task, v.Chain, Entry{CreatedAt: at, Prev: v.Prev, Payload: v.Payload})
		if err != nil {
			t.Fatalf("%s: %v", v.Name, err)
		}
		if got != v.ID {
			t.Errorf("%s: EntryID = %s, the vector says %s", v.Name, got, v.ID)
		}
		if sum := sha256.Sum256([]byte(v.Canonical)); hex.EncodeToString(sum[:]) != v.ID {
			t.Errorf("%s: the id is not the SHA-256 of the canonical bytes", v.Name)
		}
		if want := at.UTC().Truncate(time.Microsecond).Format("2006-01-02T15:04:05.000000Z"); v.CreatedAt != want {
			t.Errorf("%s: created_at = %s, want %s", v.Name, v.CreatedAt, want)
		}
		// The RFC author's implementation, from a plain (HTML-unescaped) encoding of the object.
		var plain bytes.Buffer
		enc := json.NewEncoder(&plain)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(map[string]any{"chain": v.Chain, "created_at": v.CreatedAt, "payload": v.Payload, "prev": v.Prev, "task": v.Task}); err != nil {
			t.Fatal(err)
		}
		ref, err := jsoncanonicalizer.Transform(plain.Bytes())
		if err != nil {
			t.Fatalf("%s: reference canonicalizer: %v", v.Name, err)
		}
		if string(ref) != v.Canonical {
			t.Errorf("%s: canonical =\n  %s\nthe reference canonicalizer says\n  %s", v.Name, v.Canonical, ref)
		}
	}
	// What the encoding must not do, spelled out: no HTML escapes, no trimmed fractions.
	for _, v := range f.Vectors {
		if strings.Contains(v.Canonical, `\u003c`) || strings.Contains(v.Canonical, `\u2028`) || strings.Contains(v.Canonical, `\u00e9`) {
			t.Errorf("%s: canonical form escapes what RFC 8785 writes as is: %s", v.Name, v.Canonical)
		}
		if !strings.Contains(v.Canonical, `"created_at":"`+v.CreatedAt+`"`) || len(v.CreatedAt) != len("2026-12-01T18:27:45.000000Z") {
			t.Errorf("%s: created_at %q is not six fraction digits in the canonical form", v.Name, v.CreatedAt)
		}
	}
	t.Logf("%d vectors: ids, canonical bytes and created_at agree with EntryID and the reference canonicalizer", len(f.Vectors))
}

func writeVectors(t *testing.T) {
	t.Helper()
	f := vectorFile{Description: "Chain entry id test vectors (docs/data-model.md#chain-entry-ids). For each vector: build {chain, created_at, payload, prev, task} with created_at = written_at in UTC truncated to the microsecond, six fraction digits; its RFC 8785 form must equal canonical and its lowercase hex SHA-256 must equal id."}
	for _, c := range vectorCases {
		at, err := time.Parse(time.RFC3339Nano, c.WrittenAt)
		if err != nil {
			t.Fatal(err)
		}
		c.CreatedAt = at.UTC().Truncate(time.Microsecond).Format(EntryTimeLayout)
		b, err := canonicalJSON(map[string]any{"chain": c.Chain, "created_at": c.CreatedAt, "payload": c.Payload, "prev": c.Prev, "task": c.Task})
		if err != nil {
			t.Fatal(err)
		}
		c.Canonical = string(b)
		if c.ID, err = EntryID(c.Task, c.Chain, Entry{CreatedAt: at, Prev: c.Prev, Payload: c.Payload}); err != nil {
			t.Fatal(err)
		}
		f.Vectors = append(f.Vectors, c)
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(f); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll("../../docs/contract", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(vectorsPath, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

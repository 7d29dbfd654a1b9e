package ledger

import (
	"context"
	"fmt"
	"maps"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/stalesweep/stalesweep/internal/firestoreconn"
	"github.com/stalesweep/stalesweep/internal/workflow/pausestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Collections of app invocations and their one-live-background-run interlocks.
const (
	ExtensionRunsCollection       = "extension_runs"
	ExtensionInterlocksCollection = "extension_interlocks"
)

// Extension run statuses and outcomes.
const (
	ExtensionRunning   = "running"
	ExtensionSucceeded = "succeeded"
	ExtensionFailed    = "failed"
)

// ExtensionRun is an extension_runs document: one app invocation.
type ExtensionRun struct {
	RunID       string      `firestore:"-"`
	TenantID    string      `firestore:"tenant_id"`
	ExtensionID string      `firestore:"extension_id"`
	JobName     string      `firestore:"job_name"`
	Background  bool        `firestore:"background"`
	Status      string      `firestore:"status"`
	Outcome     string      `firestore:"outcome,omitempty"`
	StartedAt   time.Time   `firestore:"started_at"`
	LastMovedAt time.Time   `firestore:"last_moved_at"`
	FinishedAt  time.Time   `firestore:"finished_at,omitempty"`
	Settlement  *Settlement `firestore:"settlement,omitempty"`

	// Malformed is set by a scan, instead of the fields above but RunID and LastMovedAt, when the
	// document could not be decoded.
	Malformed string `firestore:"-"`
}

// Interlock is an extension_interlocks document: present only while a background run of a
// tenant's extension is live, naming that run.
type Interlock struct {
	RunID      string    `firestore:"run_id"`
	AcquiredAt time.Time `firestore:"acquired_at"`
}

// InterlockID is the id of the interlock of one tenant's extension.
func InterlockID(tenantID, extensionID string) string { return tenantID + ":" + extensionID }

// ExtensionRunStore is the ledger of app invocations: the sweep's scan and settlement.
type ExtensionRunStore struct {
	client *firestore.Client
	cfg    TxConfig
}

// NewExtensionRunStore returns a store on client.
func NewExtensionRunStore(client *firestore.Client, cfg TxConfig) *ExtensionRunStore {
	return &ExtensionRunStore{client: client, cfg: cfg.WithDefaults()}
}

func (s *ExtensionRunStore) run(id string) *firestore.DocumentRef {
	return s.client.Collection(ExtensionRunsCollection).Doc(id)
}

func (s *ExtensionRunStore) interlock(tenantID, extensionID string) *firestore.DocumentRef {
	return s.client.Collection(ExtensionInterlocksCollection).Doc(InterlockID(tenantID, extensionID))
}

func (s *ExtensionRunStore) tx(ctx context.Context, f func(context.Context, *firestore.Transaction) error) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	return s.client.RunTransaction(ctx, f, firestore.MaxAttempts(s.cfg.MaxAttempts))
}

// ScanIdle returns up to limit running runs, of every tenant, whose last movement is before
// deadline, least recently moved first, after the cursor.
func (s *ExtensionRunStore) ScanIdle(ctx context.Context, deadline time.Time, after *Cursor, limit int) ([]ExtensionRun, error) {
	q := s.client.Collection(ExtensionRunsCollection).
		Where("status", "==", ExtensionRunning).
		Where("last_moved_at", "<", deadline).
		OrderBy("last_moved_at", firestore.Asc).
		OrderBy(firestore.DocumentID, firestore.Asc).
		Limit(limit)
	if after != nil {
		q = q.StartAfter(after.At, s.run(after.ID))
	}
	snaps, err := q.Documents(ctx).GetAll()
	if err != nil {
		return nil, fmt.Errorf("scan idle extension runs: %w", err)
	}
	out := make([]ExtensionRun, 0, len(snaps))
	for _, snap := range snaps {
		var r ExtensionRun
		if r.Malformed = decodeScanned(snap, &r); r.Malformed != "" {
			r.LastMovedAt = scannedTime(snap, "last_moved_at")
		}
		r.RunID = snap.Ref.ID
		out = append(out, r)
	}
	return out, nil
}

// CountRunning counts running runs of every tenant, for the storm guard; with a deadline (not
// zero), the idle ones. It is an aggregation query (billed by index entries read).
func (s *ExtensionRunStore) CountRunning(ctx context.Context, deadline time.Time) (int64, error) {
	q := s.client.Collection(ExtensionRunsCollection).Where("status", "==", ExtensionRunning)
	return countBefore(ctx, q, "last_moved_at", deadline, "count running extension runs", "count idle extension runs")
}

// Abandonment is what the sweep decided about one run.
type Abandonment struct {
	Swept bool
	Why   Left
	Pause *pausestore.Pause
	// InterlockReleased is true when the run's interlock was deleted; InterlockHolder names
	// another run holding it, left alone.
	InterlockReleased bool
	InterlockHolder   string
	Run               ExtensionRun // the run as re-read
}

// Abandon marks a run failed/abandoned in one transaction that re-reads the run and the pauses
// and asks decide whether it still may; a background run's interlock is deleted only if it
// names this run. Reads come before writes.
func (s *ExtensionRunStore) Abandon(ctx context.Context, runID string, pauses []string, settlement Settlement, decide func(ExtensionRun) Left) (Abandonment, error) {
	var out Abandonment
	err := s.tx(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		var err error
		out, err = s.abandon(tx, runID, pauses, &settlement, decide)
		return err
	})
	if err != nil && firestoreconn.Ambiguous(err) {
		if settled, ok := s.settledBy(ctx, runID, settlement.WorkflowRunUUID); ok {
			return settled, nil
		}
	}
	if err != nil {
		return Abandonment{}, fmt.Errorf("abandon extension run %s: %w", runID, err)
	}
	return out, nil
}

// settledBy resolves an ambiguous Abandon by reading the run back.
func (s *ExtensionRunStore) settledBy(ctx context.Context, runID, uuid string) (Abandonment, bool) {
	ctx, cancel := s.cfg.readBack(ctx)
	defer cancel()
	r, err := s.Row(ctx, runID)
	if err != nil {
		return Abandonment{}, false
	}
	return AbandonedBy(r.Value, uuid)
}

// Evidence keys the abandonment of a background run adds, so that a run that reads its own
// settlement back (an ambiguous commit) knows what it did to the interlock.
const (
	EvidenceInterlockReleased = "interlock_released"
	EvidenceInterlockHolder   = "interlock_holder_run_id"
)

// AbandonedBy says whether r carries the abandonment of workflow run uuid, and what it did.
func AbandonedBy(r ExtensionRun, uuid string) (Abandonment, bool) {
	if uuid == "" || r.Settlement == nil || r.Settlement.WorkflowRunUUID != uuid || r.Outcome != OutcomeAbandoned {
		return Abandonment{}, false
	}
	out := Abandonment{Swept: true, Run: r}
	out.InterlockReleased, _ = r.Settlement.Evidence[EvidenceInterlockReleased].(bool)
	out.InterlockHolder, _ = r.Settlement.Evidence[EvidenceInterlockHolder].(string)
	return out, true
}

// AbandonSettlement is the settlement written when r is abandoned as out says.
func AbandonSettlement(s Settlement, r ExtensionRun, out Abandonment) Settlement {
	if !r.Background {
		return s
	}
	ev := maps.Clone(s.Evidence)
	if ev == nil {
		ev = map[string]any{}
	}
	ev[EvidenceInterlockReleased] = out.InterlockReleased
	if out.InterlockHolder != "" {
		ev[EvidenceInterlockHolder] = out.InterlockHolder
	}
	s.Evidence = ev
	return s
}

// PreviewAbandon is Abandon in a dry run: the same reads and decision in a read-only
// transaction, nothing written.
func (s *ExtensionRunStore) PreviewAbandon(ctx context.Context, runID string, pauses []string, decide func(ExtensionRun) Left) (Abandonment, error) {
	var out Abandonment
	err := readOnlyTx(ctx, s.client, s.cfg.Timeout, func(ctx context.Context, tx *firestore.Transaction) error {
		var err error
		out, err = s.abandon(tx, runID, pauses, nil, decide)
		return err
	})
	if err != nil {
		return Abandonment{}, fmt.Errorf("preview abandoning extension run %s: %w", runID, err)
	}
	return out, nil
}

func (s *ExtensionRunStore) abandon(tx *firestore.Transaction, runID string, pauses []string, settlement *Settlement, decide func(ExtensionRun) Left) (Abandonment, error) {
	var out Abandonment
	snaps, err := tx.GetAll(append([]*firestore.DocumentRef{s.run(runID)}, pauseRefs(s.client, pauses)...))
	if err != nil {
		return out, err
	}
	if !snaps[0].Exists() {
		out.Why = LeftExtensionRunMissing
		return out, nil
	}
	var r ExtensionRun
	if err := snaps[0].DataTo(&r); err != nil {
		return out, err
	}
	r.RunID = runID
	if settlement != nil {
		if mine, ok := AbandonedBy(r, settlement.WorkflowRunUUID); ok {
			return mine, nil // this run's earlier try landed: an extra try after an ambiguous commit
		}
	}
	out.Run = r
	if out.Pause = pausestore.ActivePause(pausestore.DecodePauses(snaps[1:]), time.Now()); out.Pause != nil {
		out.Why = LeftPaused
		return out, nil
	}
	if out.Why = decide(r); out.Why != "" {
		return out, nil
	}
	var release *firestore.DocumentRef
	if r.Background {
		lock := s.interlock(r.TenantID, r.ExtensionID)
		lsnap, err := tx.Get(lock)
		switch {
		case status.Code(err) == codes.NotFound:
		case err != nil:
			return out, err
		default:
			if holder, _ := lsnap.DataAt("run_id"); holder == runID {
				release = lock
			} else {
				out.InterlockHolder = fmt.Sprint(holder)
			}
		}
	}
	out.Swept, out.InterlockReleased = true, release != nil
	if settlement == nil {
		return out, nil
	}
	written := AbandonSettlement(*settlement, r, out)
	if err := tx.Update(s.run(runID), []firestore.Update{
		{Path: "status", Value: ExtensionFailed},
		{Path: "outcome", Value: OutcomeAbandoned},
		{Path: "finished_at", Value: settlement.At},
		{Path: "settlement", Value: written},
	}); err != nil {
		return out, err
	}
	if release != nil {
		if err := tx.Delete(release); err != nil {
			return out, err
		}
	}
	return out, nil
}

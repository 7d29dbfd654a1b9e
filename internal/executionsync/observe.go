package executionsync

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/logentry"
	"github.com/stalesweep/stalesweep/internal/message"
)

// RowsByRef finds the rows a completion entry names; *ledger.ExecutionStore has it.
type RowsByRef interface {
	ActiveByRef(ctx context.Context, provider, key string, values []string) ([]ledger.Execution, error)
}

// ObserverConfig builds an Observer.
type ObserverConfig struct {
	Rows RowsByRef
	// Signals are the executors' completion signals, each with its Provider set, and Syncers the
	// syncers of those providers.
	Signals []logentry.Signal
	Syncers map[string]*Syncer
	Log     *slog.Logger
	Now     func() time.Time
	// GiveUpAfter is how old an entry may be and still ask for redelivery when a failure of
	// stalesweep's own stopped it: past it, the sweep has long settled what it named.
	GiveUpAfter time.Duration
}

// GiveUpAfterDefault is ObserverConfig.GiveUpAfter's default: ten sweep ticks.
const GiveUpAfterDefault = 10 * time.Minute

// Observer settles the rows an executor's completion entries name: the event path beside the
// sweep. An entry is only a hint; each row is settled on its executor's word, asked anew.
type Observer struct {
	rows    RowsByRef
	signals []logentry.Signal
	syncers map[string]*Syncer
	log     *slog.Logger
	now     func() time.Time
	giveUp  time.Duration
}

// NewObserver returns the observer c describes, its zero values filled with their defaults.
func NewObserver(c ObserverConfig) *Observer {
	o := &Observer{rows: c.Rows, signals: c.Signals, syncers: c.Syncers, log: c.Log, now: c.Now, giveUp: cmp.Or(c.GiveUpAfter, GiveUpAfterDefault)}
	if o.now == nil {
		o.now = time.Now
	}
	if o.log == nil {
		o.log = slog.New(slog.DiscardHandler)
	}
	return o
}

// Observation is what one entry came to.
type Observation struct {
	Ignored  string // why the entry named no row to sync (logentry.Ignored* or "no_row"), or ""
	InsertID string
	Results  []SyncResult // one per row the entry named
}

// Observe reads one entry and settles the rows it names. The error asks for redelivery: only
// a failure of stalesweep's own (Firestore, the executor) on an entry younger than GiveUpAfter;
// everything else, unreadable and unmatched entries included, is logged and acknowledged.
// log, when not nil, carries the delivery's ids.
func (o *Observer) Observe(ctx context.Context, data []byte, published time.Time, log *slog.Logger) (Observation, error) {
	log = cmp.Or(log, o.log)
	h, err := logentry.Read(data, o.signals...)
	var ig *logentry.Ignored
	switch {
	case errors.As(err, &ig):
		log.Info("log entry names no execution; acknowledged", "ignored", ig.Reason, "detail", ig.Detail)
		return Observation{Ignored: ig.Reason}, nil
	case err != nil:
		return Observation{}, err
	case h.InsertID == "":
		log.Warn("log entry without an insertId; acknowledged", "said", h.Said)
		return Observation{Ignored: logentry.IgnoredUnreadable}, nil
	}
	obs := Observation{InsertID: h.InsertID}
	log = log.With("insert_id", h.InsertID, "provider", h.Provider)
	syncer, ok := o.syncers[h.Provider]
	if !ok {
		log.Warn("completion entry for an executor this build does not sync; acknowledged")
		obs.Ignored = "no_syncer"
		return obs, nil
	}
	redeliver := func(err error) (Observation, error) {
		if age := o.now().Sub(published); !published.IsZero() && age > o.giveUp {
			log.Warn("completion entry given up after a failure of stalesweep's own; the sweep will settle its row", "error", err.Error(), "age", age.String())
			return obs, nil
		}
		return obs, err
	}
	rows, err := o.rows.ActiveByRef(ctx, h.Provider, h.RefKey, h.RefValues)
	if err != nil {
		return redeliver(err)
	}
	if len(rows) == 0 {
		log.Info("completion entry names no active row; acknowledged", "said", h.Said, "ref_key", h.RefKey, "ref_values", h.RefValues)
		obs.Ignored = "no_row"
		return obs, nil
	}
	ended := Ended{Log: h.Log, InsertID: h.InsertID}
	runID := EndedRunID(ended)
	var failed error
	for _, row := range rows {
		if row.Malformed != "" {
			log.Warn("completion entry names a row that does not decode; left to the sweep", "runner_execution_uuid", row.UUID, "malformed", row.Malformed)
			continue
		}
		res := syncer.SettleEnded(ctx, message.Sync{WorkflowRunUUID: runID, OrganizationUUID: row.OrganizationUUID, RunnerExecutionUUID: row.UUID,
			Provider: row.Provider, ProviderRef: row.ProviderRef, ObservedAt: row.ObservedAt}, ended)
		obs.Results = append(obs.Results, res)
		if res.Transient() {
			failed = errors.Join(failed, fmt.Errorf("settle runner execution %s: %s: %w", row.UUID, res.Outcome, cmp.Or(res.Err, errors.New(res.Why))))
		}
	}
	if failed != nil {
		return redeliver(failed)
	}
	return obs, nil
}

// EndedRunID is the id a completion entry's settlements carry as their workflow_run_uuid:
// derived from the entry (insertId is unique within its log), so that the entry delivered again
// finds its own settlement, and no run record is written per entry.
func EndedRunID(e Ended) string {
	sum := sha256.Sum256([]byte(e.Log + "\n" + e.InsertID))
	return endedRunPrefix + hex.EncodeToString(sum[:16])
}

const endedRunPrefix = "event-"

// IsEndedRunID reports whether id has the form of an EndedRunID: "event-" and 32 lowercase
// hexadecimal digits.
func IsEndedRunID(id string) bool {
	h, ok := strings.CutPrefix(id, endedRunPrefix)
	if !ok || len(h) != 32 || strings.ToLower(h) != h {
		return false
	}
	_, err := hex.DecodeString(h)
	return err == nil
}

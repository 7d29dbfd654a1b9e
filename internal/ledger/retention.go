package ledger

import (
	"fmt"
	"time"
)

// ExpireField is the field every document stalesweep writes for its own bookkeeping carries:
// the Firestore timestamp after which it may be deleted, by Firestore's TTL policies in
// production (terraform/firestore_ttl.tf.json) or by `stalesweep gc` anywhere (the emulator, a
// project without the policies). It is set in the same write that creates or updates the
// document. The rows the runners, workers and apps own never carry it and never expire.
const ExpireField = "expire_at"

// Retention is how long stalesweep keeps its own bookkeeping after the write that last decided
// it: Ordinary for the ordinary run and its documents, Notable for the ones an operator may want
// months later — a run that failed, settled a row lost, or was held back by a guard (the storm
// guard fails its run; the blind-executor guard holds lost settlements back), a blind target.
type Retention struct {
	Ordinary time.Duration
	Notable  time.Duration
}

// Retention defaults. Thirty days keeps every run of the last month — an incident's whole
// review, a monthly report, Pub/Sub's longest redelivery window (7 days) four times over — at
// a bounded cost: a record per scope per tick is about 43,000 a month per scope at one tick a
// minute, and they then stop accumulating. Notable runs are kept half a year: the runs that
// settled rows lost or tripped a guard are the evidence a postmortem asks for long after.
const (
	retentionDefault        = 30 * 24 * time.Hour
	retentionNotableDefault = 180 * 24 * time.Hour
	// retentionMin is the shortest retention accepted: a run record must outlive any run (a
	// run is bounded by its function's timeout, at most an hour) and its scope guard with a
	// wide margin, or a run still in flight could lose its record.
	retentionMin = 24 * time.Hour
)

// WithDefaults fills zero durations with the defaults: 30 days, and 180 (at least Ordinary).
func (r Retention) WithDefaults() Retention {
	if r.Ordinary == 0 {
		r.Ordinary = retentionDefault
	}
	if r.Notable == 0 {
		r.Notable = max(retentionNotableDefault, r.Ordinary)
	}
	return r
}

// Validate checks a retention with its defaults applied; field names the setting each duration
// came from (the environment variables), in the order ordinary, notable.
func (r Retention) Validate(ordinaryName, notableName string) error {
	r = r.WithDefaults()
	if r.Ordinary < retentionMin {
		return fmt.Errorf("%s=%s: must be at least %s (a run record must outlive its run)", ordinaryName, r.Ordinary, retentionMin)
	}
	if r.Notable < r.Ordinary {
		return fmt.Errorf("%s=%s: must be at least %s (%s): notable runs are kept at least as long as ordinary ones", notableName, r.Notable, ordinaryName, r.Ordinary)
	}
	return nil
}

// ExpiryAt is when a document written at now expires: now plus the notable retention when the
// document is notable, else plus the ordinary one (zero durations take the defaults). Every
// writer of stalesweep's bookkeeping calls it and writes the result in ExpireField, in the
// same write.
func ExpiryAt(now time.Time, r Retention, notable bool) time.Time {
	r = r.WithDefaults()
	if notable {
		return now.Add(r.Notable).UTC()
	}
	return now.Add(r.Ordinary).UTC()
}

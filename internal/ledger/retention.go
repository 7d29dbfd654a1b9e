package ledger

import (
	"fmt"
	"time"
)

// ExpireField is the Firestore timestamp after which a document of stalesweep's own bookkeeping
// may be deleted, by Firestore's TTL policies (terraform/firestore_ttl.tf.json) or by `stalesweep
// gc`. The rows the runners, workers and apps own never carry it.
const ExpireField = "expire_at"

// Retention is how long stalesweep keeps its own bookkeeping after the write that last decided
// it: Notable for what an operator may want months later (a failed run, a lost settlement, a
// guard's hold, a blind target).
type Retention struct {
	Ordinary time.Duration
	Notable  time.Duration
}

// Retention defaults. Thirty days covers an incident's review, a monthly report and Pub/Sub's
// 7-day redelivery window four times over at a bounded cost; notable runs are the evidence a
// postmortem asks for long after.
const (
	retentionDefault        = 30 * 24 * time.Hour
	retentionNotableDefault = 180 * 24 * time.Hour
	// retentionMin: a run record must outlive any run (at most an hour) and its scope guard with a
	// wide margin, or a run still in flight could lose its record.
	retentionMin = 24 * time.Hour
)

// WithDefaults fills zero durations with the defaults.
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

// ExpiryAt is when a document written at now expires; every writer of stalesweep's bookkeeping
// writes it in ExpireField in the same write.
func ExpiryAt(now time.Time, r Retention, notable bool) time.Time {
	r = r.WithDefaults()
	if notable {
		return now.Add(r.Notable).UTC()
	}
	return now.Add(r.Ordinary).UTC()
}

package blindguard

import (
	"testing"
	"time"

	"github.com/stalesweep/stalesweep/internal/ledger"
)

func TestBlind(t *testing.T) {
	c := Config{Fraction: 0.5, MinRows: 10}
	for _, tt := range []struct {
		asked, unknown int64
		blind          bool
	}{
		{30, 30, true},   // every execution it should know is gone
		{30, 16, true},   // more than half
		{30, 15, false},  // exactly half is not more than half
		{33, 3, false},   // a few aged out among many it knows
		{9, 9, false},    // too few rows to judge a target by
		{10, 6, true},    // the minimum reached
		{0, 0, false},    // nothing asked
		{12, 40, true},   // more unknown than answered within the window: rows not synced lately
		{100, 51, true},  // a large target
		{100, 50, false}, // at the fraction
	} {
		if got := c.Blind(tt.asked, tt.unknown); got != tt.blind {
			t.Errorf("Blind(asked %d, unknown %d) = %t, want %t", tt.asked, tt.unknown, got, tt.blind)
		}
	}
	if (Config{}).WithDefaults() != (Config{Fraction: FractionDefault, MinRows: MinRowsDefault, Window: WindowDefault}) {
		t.Error("defaults")
	}
}

func TestFresh(t *testing.T) {
	now := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		t     *ledger.Target
		fresh bool
	}{
		{nil, false},
		{&ledger.Target{}, false},
		{&ledger.Target{JudgedAt: now}, true},
		{&ledger.Target{JudgedAt: now.Add(-Interval + time.Second)}, true},
		{&ledger.Target{JudgedAt: now.Add(-Interval)}, false},
		{&ledger.Target{JudgedAt: now.Add(2 * Interval)}, false}, // a judgment from the future is not trusted
	} {
		if got := Fresh(tt.t, now); got != tt.fresh {
			t.Errorf("Fresh(%+v) = %t, want %t", tt.t, got, tt.fresh)
		}
	}
}

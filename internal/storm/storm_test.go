package storm

import (
	"errors"
	"testing"
)

func TestJudge(t *testing.T) {
	c := Config{}.WithDefaults()
	for _, tc := range []struct {
		name        string
		aged, live  int64
		tripped     bool
		wantAllowed int64
	}{
		{"nothing aged", 0, 1000, false, 500},
		{"half of the scope", 500, 1000, false, 500},
		{"one more than half", 501, 1000, true, 500},
		{"a small scope all gone: the minimum", 10, 10, false, 10},
		{"a small scope past the minimum", 11, 12, true, 10},
		{"an empty scope", 0, 0, false, 10},
	} {
		v := c.Judge(tc.aged, tc.live)
		if v.Tripped != tc.tripped || v.Allowed != tc.wantAllowed || v.Aged != tc.aged || v.Live != tc.live {
			t.Errorf("%s: %+v, want tripped %t allowed %d", tc.name, v, tc.tripped, tc.wantAllowed)
		}
		if v.Holds() != tc.tripped {
			t.Errorf("%s: holds %t", tc.name, v.Holds())
		}
	}
	off := Config{Fraction: 1}.WithDefaults()
	if v := off.Judge(1_000_000, 1_000_000); v.Tripped {
		t.Errorf("fraction 1 tripped: %+v", v)
	}
	v := c.Judge(900, 1000)
	if got := v.Override(false); got.Overridden || !got.Holds() {
		t.Errorf("a tripped verdict without the override: %+v, holds %t", got, got.Holds())
	}
	if got := v.Override(true); !got.Overridden || got.Holds() {
		t.Errorf("an overridden verdict: %+v, holds %t", got, got.Holds())
	}
	if got := c.Judge(1, 1000).Override(true); got.Overridden {
		t.Errorf("a verdict that did not trip was overridden: %+v", got)
	}
	if !errors.Is(v.Err(), ErrTripped) {
		t.Errorf("%v is not ErrTripped", v.Err())
	}
	if se := v.StepError(); se.Reason != Reason || se.Step != Reason || se.Layer != "workflow" || !errors.Is(se.Err, ErrTripped) {
		t.Errorf("step error = %+v", se)
	}
}

func TestValidate(t *testing.T) {
	for _, c := range []Config{{Fraction: 0, MinRows: 1}, {Fraction: 1.5, MinRows: 1}, {Fraction: -0.1, MinRows: 1}, {Fraction: 0.5, MinRows: 0}} {
		if c.Validate() == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	if err := (Config{}).WithDefaults().Validate(); err != nil {
		t.Errorf("the defaults: %v", err)
	}
}

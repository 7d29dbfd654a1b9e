package demo

import (
	"context"
	"fmt"
	"time"

	"cloud.google.com/go/firestore"
	"cloud.google.com/go/run/apiv2/runpb"
	"github.com/google/uuid"

	"github.com/stalesweep/stalesweep/emulator/cloudrunfake"
	"github.com/stalesweep/stalesweep/internal/ledger"
)

// Kind is a category of seeded row, with what the sweep must make of it.
type Kind struct {
	Name     string
	Count    int
	Expected string
	// check reports whether a final row is as expected, given the row as seeded.
	check func(seeded, final ledger.Execution) bool
}

func settledAs(outcome, status string) func(seeded, final ledger.Execution) bool {
	return func(_, f ledger.Execution) bool {
		return !f.Active && f.Outcome == outcome && f.Status == status && f.Settlement != nil && !f.CompletedAt.IsZero()
	}
}

func untouched(s, f ledger.Execution) bool {
	return f.Active && f.Status == s.Status && f.ObservedAt.Equal(s.ObservedAt) && f.Settlement == nil && f.Sync.Attempts == 0
}

func refreshed(s, f ledger.Execution) bool {
	return f.Active && f.Status == s.Status && f.ObservedAt.After(s.ObservedAt) && f.Settlement == nil &&
		f.Sync.LastVerdict == "running"
}

// kinds lists the categories of the main organization. Their counts add up to 240.
func kinds() []Kind {
	return []Kind{
		{Name: "finished: succeeded", Count: 60, Expected: "settled succeeded", check: settledAs(ledger.OutcomeSucceeded, ledger.StatusSucceeded)},
		{Name: "finished: failed", Count: 40, Expected: "settled failed, with reason", check: func(s, f ledger.Execution) bool {
			return settledAs(ledger.OutcomeFailed, ledger.StatusFailed)(s, f) && f.FailureReason != ""
		}},
		{Name: "finished: cancelled", Count: 20, Expected: "settled cancelled", check: settledAs(ledger.OutcomeCancelled, ledger.StatusCancelled)},
		{Name: "still running", Count: 40, Expected: "kept active, observed_at refreshed", check: refreshed},
		{Name: "not found at Cloud Run", Count: 20, Expected: "settled lost after the grace", check: settledAs(ledger.OutcomeLost, ledger.StatusFailed)},
		{Name: "no provider reference", Count: 20, Expected: "skipped, counted, untouched", check: untouched},
		{Name: "fresh (observed just now)", Count: 40, Expected: "untouched", check: untouched},
	}
}

// seeded is one row as written, with its kind.
type seeded struct {
	kind string
	row  ledger.Execution
}

// seed writes the organizations' rows, whole, as a runner would (the demo is the runners here),
// and the fake's executions.
func seed(ctx context.Context, fs *firestore.Client, fake *cloudrunfake.Server, orgA, orgB string, now time.Time) ([]seeded, error) {
	const project, location = "demo-project", "europe-west1"
	var out []seeded
	n := 0
	add := func(kind, org string, observedAt time.Time, ref map[string]any, exec *runpb.Execution) error {
		n++
		row := ledger.Execution{
			UUID:             uuid.NewString(),
			OrganizationUUID: org,
			RunnerGroupUUID:  "8a1f5e52-61c4-4b7e-9f4e-2d7c9a0b3c11",
			Provider:         ledger.ProviderCloudRun,
			ProviderRef:      ref,
			Status:           ledger.StatusRunning,
			Active:           true,
			ObservedAt:       observedAt.Truncate(time.Microsecond),
		}
		if n%7 == 0 {
			row.Status = ledger.StatusPending
		}
		if exec != nil {
			if err := fake.SetExecution(exec); err != nil {
				return err
			}
		}
		if _, err := fs.Collection(ledger.ExecutionsCollection).Doc(row.UUID).Set(ctx, row); err != nil {
			return fmt.Errorf("put execution %s: %w", row.UUID, err)
		}
		out = append(out, seeded{kind: kind, row: row})
		return nil
	}
	name := func(job string, i int) string {
		return cloudrunfake.ExecutionName(project, location, job, fmt.Sprintf("%s-%05d", job, i))
	}
	ref := func(execName string) map[string]any { return map[string]any{"execution": execName} }
	stale := func(i int) time.Time { return now.Add(-time.Duration(5+i%115) * time.Minute) }
	finishedAt := func(i int) time.Time { return stale(i).Add(-time.Minute) }

	for _, k := range kinds() {
		for i := range k.Count {
			var err error
			switch k.Name {
			case "finished: succeeded":
				e := name("nightly-build", i)
				err = add(k.Name, orgA, stale(i), ref(e), cloudrunfake.Succeeded(e, finishedAt(i)))
			case "finished: failed":
				e := name("integration-tests", i)
				reason := runpb.Condition_NON_ZERO_EXIT_CODE
				if i%10 == 0 {
					reason = runpb.Condition_DELAYED_EXECUTION_EXCEEDING_DURATION_LIMIT
				}
				err = add(k.Name, orgA, stale(i), ref(e), cloudrunfake.Failed(e, finishedAt(i), reason))
			case "finished: cancelled":
				e := name("deploy-canary", i)
				err = add(k.Name, orgA, stale(i), ref(e), cloudrunfake.Cancelled(e, finishedAt(i)))
			case "still running":
				e := name("data-backfill", i)
				var x *runpb.Execution
				switch i % 4 {
				case 0:
					x = cloudrunfake.Running(e, stale(i))
				case 1:
					x = cloudrunfake.Reconciling(e, stale(i))
				case 2:
					x = cloudrunfake.Pending(e, stale(i))
				default:
					x = cloudrunfake.Cancelling(e, stale(i))
				}
				err = add(k.Name, orgA, stale(i), ref(e), x)
			case "not found at Cloud Run":
				err = add(k.Name, orgA, stale(i), ref(name("aged-out", i)), nil)
			case "no provider reference":
				var r map[string]any
				switch i % 3 {
				case 1:
					r = map[string]any{}
				case 2:
					r = map[string]any{"execution": "not-a-resource-name"}
				}
				err = add(k.Name, orgA, stale(i), r, nil)
			case "fresh (observed just now)":
				e := name("nightly-build-fresh", i)
				err = add(k.Name, orgA, now.Add(-5*time.Second), ref(e), cloudrunfake.Succeeded(e, now.Add(-10*time.Second)))
			}
			if err != nil {
				return nil, fmt.Errorf("seed %s: %w", k.Name, err)
			}
		}
	}
	for i := range 30 {
		e := name("other-org-job", i)
		if err := add(otherOrg, orgB, stale(i), ref(e), cloudrunfake.Succeeded(e, finishedAt(i))); err != nil {
			return nil, fmt.Errorf("seed the other organization: %w", err)
		}
	}
	return out, nil
}

const otherOrg = "other organization (stale, finished)"

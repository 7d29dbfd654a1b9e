package bench

import (
	"context"
	"fmt"
	"slices"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/google/uuid"

	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/testkit/fsspy"
)

// staleInScan is how many stale rows each scan finds, whatever the collection's size.
const staleInScan = 10

// measureScan times one organization's scan over few and many non-stale rows (plus other
// tenants' rows): the documents it reads must be the same, and its time close.
func measureScan(ctx context.Context, e *env, p *progress, sz sizes, res *Result) error {
	for _, size := range []int{sz.scanSmall, sz.scanLarge} {
		ms, floor, docs, err := scanOnce(ctx, size, sz.otherTenants)
		if err != nil {
			return err
		}
		p.say("%d non-stale rows and %d of other tenants: scan %.2f ms (emulator floor %.2f ms), %d documents read", size, sz.otherTenants, ms, floor, docs)
		if size == sz.scanSmall {
			res.ScanMsSmall, res.ScanFloorMsSmall, res.ScanDocsReadSmall, res.ScanRowsSmall = ms, floor, docs, size
		} else {
			res.ScanMsLarge, res.ScanFloorMsLarge, res.ScanDocsReadLarge, res.ScanRowsLarge = ms, floor, docs, size
		}
	}
	res.ScanCostRatio = res.ScanMsLarge / res.ScanMsSmall
	res.ScanFloorRatio = res.ScanFloorMsLarge / res.ScanFloorMsSmall
	res.ScanCostRatioVsFloor = res.ScanCostRatio / res.ScanFloorRatio
	return nil
}

// scanOnce returns the median time of the organization's scan, the median time of the
// emulator's floor — the simplest query there is, one equality matching nothing, on the same
// collection — and the documents the scan read. The emulator evaluates every query over the
// whole collection (a query by document id grows the same way; a get by reference does not),
// so its time grows with the collection whatever the query; production serves the scan from its
// composite index. The floor, measured side by side, separates the two.
func scanOnce(ctx context.Context, fresh, others int) (float64, float64, int, error) {
	spy := fsspy.New()
	fs, done, err := project(ctx, spy)
	if err != nil {
		return 0, 0, 0, err
	}
	defer done()
	org := uuid.NewString()
	now := time.Now()
	ref := map[string]any{"execution": "projects/p/locations/l/jobs/j/executions/e"}
	err = bulk(ctx, fs, fresh+staleInScan+others, func(i int) (*firestore.DocumentRef, any) {
		row := ledger.Execution{OrganizationUUID: org, Provider: ledger.ProviderCloudRun, Status: ledger.StatusRunning, Active: true, ObservedAt: now, ProviderRef: ref}
		switch {
		case i < staleInScan:
			row.ObservedAt = now.Add(-time.Hour)
		case i >= staleInScan+fresh:
			row.OrganizationUUID = "other-" + uuid.NewString()[:4]
			row.ObservedAt = now.Add(-time.Hour)
		}
		return fs.Collection(ledger.ExecutionsCollection).NewDoc(), row
	})
	if err != nil {
		return 0, 0, 0, err
	}
	store := ledger.NewExecutionStore(fs, ledger.TxConfig{}, ledger.Retention{})
	q := ledger.ScanQuery{OrganizationUUID: org, Provider: ledger.ProviderCloudRun, Horizon: now.Add(-time.Minute), PageSize: 25}
	floorQuery := fs.Collection(ledger.ExecutionsCollection).Where("organization_uuid", "==", "nobody").Limit(25)
	var times, floors []float64
	docs := 0
	for i := range 8 {
		spy.Reset()
		begin := time.Now()
		rows, _, err := store.Scan(ctx, q)
		elapsed := float64(time.Since(begin).Microseconds()) / 1000
		if err != nil {
			return 0, 0, 0, err
		}
		docs = len(spy.Reads())
		begin = time.Now()
		if _, err := floorQuery.Documents(ctx).GetAll(); err != nil {
			return 0, 0, 0, err
		}
		floor := float64(time.Since(begin).Microseconds()) / 1000
		if i == 0 { // warm-up
			continue
		}
		times, floors = append(times, elapsed), append(floors, floor)
		if len(rows) != staleInScan {
			return 0, 0, 0, fmt.Errorf("the scan found %d rows, want the %d stale ones", len(rows), staleInScan)
		}
	}
	slices.Sort(times)
	slices.Sort(floors)
	return times[len(times)/2], floors[len(floors)/2], docs, nil
}

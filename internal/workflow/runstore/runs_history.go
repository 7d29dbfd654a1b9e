package runstore

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/stalesweep/stalesweep/internal/firestoreconn"
	"github.com/stalesweep/stalesweep/internal/ledger"
)

// Bounds of RunQuery.Limit.
const (
	RunListLimitDefault = 20
	RunListLimitMax     = 500
)

// RunQuery asks for one page of run records, newest first.
type RunQuery struct {
	WorkflowType string // "" for every type
	// Scope, a ScopeValues.Key, needs WorkflowType: a key's form is its workflow's.
	Scope  string
	Status string    // "" for every status
	Since  time.Time // zero for no lower bound on initiated_at (inclusive)
	Limit  int       // 0 is RunListLimitDefault; at most RunListLimitMax
	// PageToken is a RunPage.Next of the same query; "" for the first page.
	PageToken string
}

// RunPage is one page of runs, and the token of the next ("" on the last).
type RunPage struct {
	Runs []RunRecord
	Next string
}

// Check reports why q cannot run, naming the field and the rule, or nil.
func (q RunQuery) Check() error {
	switch {
	case q.Limit < 0 || q.Limit > RunListLimitMax:
		return fmt.Errorf("limit: between 1 and %d, got %d", RunListLimitMax, q.Limit)
	case q.Scope != "" && q.WorkflowType == "":
		return fmt.Errorf("scope: needs workflow_type, since a scope key's form is its workflow's")
	}
	if q.PageToken != "" {
		if _, _, err := decodeRunToken(q.PageToken); err != nil {
			return err
		}
	}
	return nil
}

// ListRuns returns one page of run records matching q, newest initiated first (ties by uuid,
// descending): one query of at most Limit+1 documents, paged by a cursor on (initiated_at, id),
// never an offset. Indexes declares the composite index of each combination of filters.
func (s *Store) ListRuns(ctx context.Context, q RunQuery) (RunPage, error) {
	if err := q.Check(); err != nil {
		return RunPage{}, fmt.Errorf("list runs: %w", err)
	}
	limit := q.Limit
	if limit == 0 {
		limit = RunListLimitDefault
	}
	fq := s.client.Collection(ledger.RunsCollection).Query
	if q.WorkflowType != "" {
		fq = fq.Where("workflow_type", "==", q.WorkflowType)
	}
	if q.Scope != "" {
		fq = fq.Where("scope", "==", q.Scope)
	}
	if q.Status != "" {
		fq = fq.Where("status", "==", q.Status)
	}
	if !q.Since.IsZero() {
		fq = fq.Where("initiated_at", ">=", q.Since)
	}
	fq = fq.OrderBy("initiated_at", firestore.Desc).OrderBy(firestore.DocumentID, firestore.Desc)
	if q.PageToken != "" {
		at, id, _ := decodeRunToken(q.PageToken)
		fq = fq.StartAfter(at, s.ref(id))
	}
	snaps, err := fq.Limit(limit + 1).Documents(ctx).GetAll()
	if err != nil {
		return RunPage{}, fmt.Errorf("list runs: %w", err)
	}
	var page RunPage
	for i, snap := range snaps {
		if i == limit {
			last := page.Runs[len(page.Runs)-1]
			page.Next = encodeRunToken(last.InitiatedAt, snaps[i-1].Ref.ID)
			break
		}
		var r RunRecord
		if err := snap.DataTo(&r); err != nil {
			return RunPage{}, fmt.Errorf("decode run %s: %w", snap.Ref.ID, err)
		}
		page.Runs = append(page.Runs, r)
	}
	return page, nil
}

// A page token is the last run's initiated_at and id, opaque to the caller.
func encodeRunToken(at time.Time, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(at.UTC().Format(time.RFC3339Nano) + " " + id))
}

func decodeRunToken(tok string) (time.Time, string, error) {
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return time.Time{}, "", fmt.Errorf("page_token: format: not a token this command printed")
	}
	ts, id, ok := strings.Cut(string(raw), " ")
	at, err := time.Parse(time.RFC3339Nano, ts)
	if !ok || err != nil || firestoreconn.CheckDocID(id) != nil {
		return time.Time{}, "", fmt.Errorf("page_token: format: not a token this command printed")
	}
	return at, id, nil
}

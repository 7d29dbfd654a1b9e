package runstore

import (
	"context"
	"fmt"

	"cloud.google.com/go/firestore"

	"github.com/stalesweep/stalesweep/internal/ledger"
)

// LatestOfOrganization returns the newest run of workflowType whose initial_data names org, on
// any of its scopes; false when there is none. One document, served by the index Indexes declares.
func (s *Store) LatestOfOrganization(ctx context.Context, workflowType, org string) (RunRecord, bool, error) {
	snaps, err := s.client.Collection(ledger.RunsCollection).
		Where("workflow_type", "==", workflowType).
		Where("initial_data.organization_uuid", "==", org).
		OrderBy("initiated_at", firestore.Desc).
		Limit(1).Documents(ctx).GetAll()
	if err != nil {
		return RunRecord{}, false, fmt.Errorf("find the newest %s run of organization %s: %w", workflowType, org, err)
	}
	if len(snaps) == 0 {
		return RunRecord{}, false, nil
	}
	var r RunRecord
	if err := snaps[0].DataTo(&r); err != nil {
		return RunRecord{}, false, fmt.Errorf("decode run %s: %w", snaps[0].Ref.ID, err)
	}
	return r, true, nil
}

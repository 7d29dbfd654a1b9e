package ledger

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/stalesweep/stalesweep/internal/firestoreconn"
	"github.com/stalesweep/stalesweep/internal/workflow/pausestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Collections of runner groups, their instances, and the workspace leases instances hold.
const (
	RunnerGroupsCollection    = "runner_groups"
	RunnerInstancesCollection = "runner_instances"
	WorkspaceLeasesCollection = "workspace_leases"
)

// Runner instance statuses a lease settle tells apart; the last three are terminal. A runner
// also writes "starting" and "draining", which are neither running nor terminal.
const (
	InstanceRunning    = "running"
	InstanceStopped    = "stopped"
	InstanceTerminated = "terminated"
	InstanceFailed     = "failed"
)

// InstanceTerminal reports whether an instance status is terminal.
func InstanceTerminal(s string) bool {
	return s == InstanceStopped || s == InstanceTerminated || s == InstanceFailed
}

// Lease statuses; active is the only non-terminal one.
const (
	LeaseActive    = "active"
	LeaseReleased  = "released"
	LeaseAbandoned = "abandoned"
)

// RunnerGroup is a runner_groups document.
type RunnerGroup struct {
	UUID                    string `firestore:"-"`
	OrganizationUUID        string `firestore:"organization_uuid"`
	HeartbeatTimeoutSeconds int64  `firestore:"heartbeat_timeout_seconds"`
}

// RunnerInstance is a runner_instances document.
type RunnerInstance struct {
	UUID             string `firestore:"-"`
	OrganizationUUID string `firestore:"organization_uuid"`
	RunnerGroupUUID  string `firestore:"runner_group_uuid"`
	Status           string `firestore:"status"`
}

// WorkspaceLease is a workspace_leases document.
type WorkspaceLease struct {
	UUID             string      `firestore:"-"`
	OrganizationUUID string      `firestore:"organization_uuid"`
	RunnerGroupUUID  string      `firestore:"runner_group_uuid"`
	WorkspaceID      string      `firestore:"workspace_id"`
	HolderUUID       string      `firestore:"holder_runner_instance_uuid"`
	Status           string      `firestore:"status"`
	AcquiredAt       time.Time   `firestore:"acquired_at"`
	HeartbeatAt      time.Time   `firestore:"heartbeat_at"`
	ReleasedAt       time.Time   `firestore:"released_at,omitempty"`
	Settlement       *Settlement `firestore:"settlement,omitempty"`

	// Malformed is set by a scan, instead of the fields above but UUID and HeartbeatAt, when the
	// document could not be decoded.
	Malformed string `firestore:"-"`
}

// Errors of the lease operations.
var (
	ErrGroupNotFound = errors.New("runner group not found")
)

// LeaseStore is the ledger of runner groups, instances and workspace leases.
type LeaseStore struct {
	client *firestore.Client
	cfg    TxConfig
}

// NewLeaseStore returns a store on client.
func NewLeaseStore(client *firestore.Client, cfg TxConfig) *LeaseStore {
	return &LeaseStore{client: client, cfg: cfg.WithDefaults()}
}

func (s *LeaseStore) group(id string) *firestore.DocumentRef {
	return s.client.Collection(RunnerGroupsCollection).Doc(id)
}

func (s *LeaseStore) instance(id string) *firestore.DocumentRef {
	return s.client.Collection(RunnerInstancesCollection).Doc(id)
}

func (s *LeaseStore) lease(id string) *firestore.DocumentRef {
	return s.client.Collection(WorkspaceLeasesCollection).Doc(id)
}

func (s *LeaseStore) tx(ctx context.Context, f func(context.Context, *firestore.Transaction) error) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	return s.client.RunTransaction(ctx, f, firestore.MaxAttempts(s.cfg.MaxAttempts))
}

// GetGroup reads a runner group; a missing one is ErrGroupNotFound.
func (s *LeaseStore) GetGroup(ctx context.Context, id string) (RunnerGroup, error) {
	snap, err := s.group(id).Get(ctx)
	if status.Code(err) == codes.NotFound {
		return RunnerGroup{}, fmt.Errorf("runner group %s: %w", id, ErrGroupNotFound)
	}
	if err != nil {
		return RunnerGroup{}, fmt.Errorf("get runner group %s: %w", id, err)
	}
	var g RunnerGroup
	if err := snap.DataTo(&g); err != nil {
		return RunnerGroup{}, fmt.Errorf("decode runner group %s: %w", id, err)
	}
	g.UUID = id
	return g, nil
}

// ListGroups returns up to limit runner group ids of an organization, in id order.
func (s *LeaseStore) ListGroups(ctx context.Context, org string, limit int) ([]string, error) {
	snaps, err := s.client.Collection(RunnerGroupsCollection).Where("organization_uuid", "==", org).
		OrderBy(firestore.DocumentID, firestore.Asc).Limit(limit).Documents(ctx).GetAll()
	if err != nil {
		return nil, fmt.Errorf("list runner groups of %s: %w", org, err)
	}
	out := make([]string, len(snaps))
	for i, snap := range snaps {
		out[i] = snap.Ref.ID
	}
	return out, nil
}

// ScanActive returns up to limit active leases of one group of one organization, oldest
// heartbeat first, after the cursor; leases whose heartbeat_at is not a timestamp are never
// touched (Invisible).
func (s *LeaseStore) ScanActive(ctx context.Context, org, group string, after *Cursor, limit int) ([]WorkspaceLease, error) {
	q := s.active(org, group).Where("heartbeat_at", ">=", firestoreconn.MinTime).
		OrderBy("heartbeat_at", firestore.Asc).OrderBy(firestore.DocumentID, firestore.Asc).
		Limit(limit)
	if after != nil {
		q = q.StartAfter(after.At, s.lease(after.ID))
	}
	snaps, err := q.Documents(ctx).GetAll()
	if err != nil {
		return nil, fmt.Errorf("scan active leases of group %s: %w", group, err)
	}
	out := make([]WorkspaceLease, 0, len(snaps))
	for _, snap := range snaps {
		var l WorkspaceLease
		if l.Malformed = decodeScanned(snap, &l); l.Malformed != "" {
			l.HeartbeatAt = scannedTime(snap, "heartbeat_at")
		}
		l.UUID = snap.Ref.ID
		out = append(out, l)
	}
	return out, nil
}

// CountActive counts one group's active leases; with a `before` (not zero), the stale ones.
func (s *LeaseStore) CountActive(ctx context.Context, org, group string, before time.Time) (int64, error) {
	return countBefore(ctx, s.active(org, group), "heartbeat_at", before, "count active leases of group "+group, "count stale leases of group "+group)
}

func (s *LeaseStore) active(org, group string) firestore.Query {
	return s.client.Collection(WorkspaceLeasesCollection).
		Where("organization_uuid", "==", org).
		Where("runner_group_uuid", "==", group).
		Where("status", "==", LeaseActive)
}

// Instances reads runner instances by id in one batch; a missing id is absent from the result.
func (s *LeaseStore) Instances(ctx context.Context, ids []string) (map[string]RunnerInstance, error) {
	uniq := slices.Compact(slices.Sorted(slices.Values(ids)))
	var refs []*firestore.DocumentRef
	for _, id := range uniq {
		if id != "" {
			refs = append(refs, s.instance(id))
		}
	}
	out := map[string]RunnerInstance{}
	if len(refs) == 0 {
		return out, nil
	}
	snaps, err := s.client.GetAll(ctx, refs)
	if err != nil {
		return nil, fmt.Errorf("read runner instances: %w", err)
	}
	for _, snap := range snaps {
		if !snap.Exists() {
			continue
		}
		var in RunnerInstance
		if err := snap.DataTo(&in); err != nil {
			continue // an undecodable instance is unresolvable
		}
		in.UUID = snap.Ref.ID
		out[in.UUID] = in
	}
	return out, nil
}

// HolderView is a lease's holder as one read saw it: resolved with a status, or unresolvable.
type HolderView struct {
	Resolved bool
	Status   string
}

// ResolveHolder judges an instance as the holder of a lease.
func ResolveHolder(l WorkspaceLease, in RunnerInstance, found bool) HolderView {
	if !found || in.OrganizationUUID != l.OrganizationUUID || in.RunnerGroupUUID != l.RunnerGroupUUID {
		return HolderView{}
	}
	return HolderView{Resolved: true, Status: in.Status}
}

// AbandonLease abandons a lease in one transaction if a re-read of the lease, its holder and the
// documents reads names still supports decide's verdict; a non-empty refusal names a broken rule
// about who may write the lease. Reads come before writes; nothing but the lease's status,
// settlement and released-at time is written, and nothing is deleted.
func (s *LeaseStore) AbandonLease(ctx context.Context, leaseID string, reads Reads, decide func(WorkspaceLease, HolderView, Facts) (*Settlement, string)) (abandoned bool, refused string, err error) {
	var tried *Settlement // what the last attempt would have committed
	err = s.tx(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		var st *Settlement
		tried = nil
		st, refused, err = s.planAbandonLease(tx, leaseID, reads, decide)
		abandoned = err == nil && refused == "" && st != nil
		if !abandoned {
			return err
		}
		tried = st
		return tx.Update(s.lease(leaseID), []firestore.Update{
			{Path: "status", Value: LeaseAbandoned},
			{Path: "released_at", Value: st.At},
			{Path: "settlement", Value: st},
		})
	})
	if err != nil && firestoreconn.Ambiguous(err) && tried != nil && s.abandonedBy(ctx, leaseID, tried.WorkflowRunUUID) {
		return true, "", nil
	}
	if err != nil {
		return false, "", fmt.Errorf("abandon lease %s: %w", leaseID, err)
	}
	return abandoned, refused, nil
}

// abandonedBy resolves an ambiguous AbandonLease by reading the lease back.
func (s *LeaseStore) abandonedBy(ctx context.Context, leaseID, uuid string) bool {
	ctx, cancel := s.cfg.readBack(ctx)
	defer cancel()
	r, err := s.Row(ctx, leaseID)
	l := r.Value
	return err == nil && uuid != "" && l.Status == LeaseAbandoned && l.Settlement != nil && l.Settlement.WorkflowRunUUID == uuid
}

// PreviewAbandonLease is AbandonLease in a dry run: the same reads and decision in a read-only
// transaction, nothing written.
func (s *LeaseStore) PreviewAbandonLease(ctx context.Context, leaseID string, reads Reads, decide func(WorkspaceLease, HolderView, Facts) (*Settlement, string)) (abandoned bool, refused string, err error) {
	err = readOnlyTx(ctx, s.client, s.cfg.Timeout, func(ctx context.Context, tx *firestore.Transaction) error {
		var st *Settlement
		st, refused, err = s.planAbandonLease(tx, leaseID, reads, decide)
		abandoned = err == nil && refused == "" && st != nil
		return err
	})
	if err != nil {
		return false, "", fmt.Errorf("preview abandoning lease %s: %w", leaseID, err)
	}
	return abandoned, refused, nil
}

func (s *LeaseStore) planAbandonLease(tx *firestore.Transaction, leaseID string, reads Reads, decide func(WorkspaceLease, HolderView, Facts) (*Settlement, string)) (*Settlement, string, error) {
	refs := []*firestore.DocumentRef{s.lease(leaseID)}
	if reads.Organization != "" {
		refs = append(refs, s.client.Collection(OrganizationsCollection).Doc(reads.Organization))
	}
	pausesAt := len(refs)
	refs = append(refs, pauseRefs(s.client, reads.Pauses)...)
	snaps, err := tx.GetAll(refs)
	if err != nil {
		return nil, "", err
	}
	if !snaps[0].Exists() {
		return nil, "", nil
	}
	var l WorkspaceLease
	if err := snaps[0].DataTo(&l); err != nil {
		return nil, "", err
	}
	l.UUID = leaseID
	var facts Facts
	if reads.Organization != "" {
		facts.OrganizationEnabled = SweepsEnabled(snaps[1])
	}
	if facts.Pauses = pausestore.DecodePauses(snaps[pausesAt:]); pausestore.ActivePause(facts.Pauses, time.Now()) != nil {
		return nil, string(LeftPaused), nil
	}
	var view HolderView
	if l.HolderUUID != "" {
		isnap, err := tx.Get(s.instance(l.HolderUUID))
		switch {
		case status.Code(err) == codes.NotFound:
		case err != nil:
			return nil, "", err
		default:
			var in RunnerInstance
			if derr := isnap.DataTo(&in); derr == nil {
				view = ResolveHolder(l, in, true)
			}
		}
	}
	st, why := decide(l, view, facts)
	return st, why, nil
}

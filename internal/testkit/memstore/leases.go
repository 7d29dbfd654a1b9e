package memstore

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/stalesweep/stalesweep/internal/ledger"
)

// Leases is the runner groups' ledger in memory — groups, instances, workspace leases and the
// organizations' opt-out — : leasesettle.Store, as *ledger.LeaseStore is.
type Leases struct {
	Hooks
	Pauses

	mu            sync.Mutex
	groups        map[string]ledger.RunnerGroup
	instances     map[string]ledger.RunnerInstance
	leases        map[string]ledger.WorkspaceLease
	invisible     map[string]ledger.WorkspaceLease // active, heartbeat_at not a timestamp
	organizations map[string]bool                  // sweeps_enabled; absent: no document
}

// NewLeases returns an empty store.
func NewLeases() *Leases {
	return &Leases{groups: map[string]ledger.RunnerGroup{}, instances: map[string]ledger.RunnerInstance{},
		leases: map[string]ledger.WorkspaceLease{}, invisible: map[string]ledger.WorkspaceLease{}, organizations: map[string]bool{}}
}

// PutGroup writes a runner group.
func (s *Leases) PutGroup(g ledger.RunnerGroup) { put(&s.mu, s.groups, g.UUID, g) }

// PutInstance writes a runner instance.
func (s *Leases) PutInstance(in ledger.RunnerInstance) { put(&s.mu, s.instances, in.UUID, in) }

// PutOrganization writes an organization's sweeps_enabled.
func (s *Leases) PutOrganization(id string, sweepsEnabled bool) {
	put(&s.mu, s.organizations, id, sweepsEnabled)
}

// Put writes a lease as it is. With Malformed set it stands for a document that does not
// decode: only its UUID, OrganizationUUID, RunnerGroupUUID, Status and HeartbeatAt are readable.
func (s *Leases) Put(l ledger.WorkspaceLease) { put(&s.mu, s.leases, l.UUID, l) }

// PutInvisible writes an active lease of l's organization and group whose heartbeat_at is
// missing or not a timestamp.
func (s *Leases) PutInvisible(l ledger.WorkspaceLease) { put(&s.mu, s.invisible, l.UUID, l) }

// Heartbeat refreshes an active lease at `at`, as its holder would.
func (s *Leases) Heartbeat(leaseID string, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l, ok := s.leases[leaseID]; ok && l.Status == ledger.LeaseActive {
		l.HeartbeatAt = at
		s.leases[leaseID] = l
	}
}

// Get reads a lease.
func (s *Leases) Get(leaseID string) (ledger.WorkspaceLease, bool) {
	return get(&s.mu, s.leases, leaseID)
}

// GetGroup is LeaseStore.GetGroup: a missing group is ledger.ErrGroupNotFound.
func (s *Leases) GetGroup(ctx context.Context, id string) (ledger.RunnerGroup, error) {
	if err := s.enter(ctx, "GetGroup", id); err != nil {
		return ledger.RunnerGroup{}, fmt.Errorf("get runner group %s: %w", id, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.groups[id]
	if !ok {
		return ledger.RunnerGroup{}, fmt.Errorf("runner group %s: %w", id, ledger.ErrGroupNotFound)
	}
	return g, nil
}

func (s *Leases) active(org, group string) []ledger.WorkspaceLease {
	var out []ledger.WorkspaceLease
	for _, l := range s.leases {
		if l.OrganizationUUID == org && l.RunnerGroupUUID == group && l.Status == ledger.LeaseActive {
			out = append(out, l)
		}
	}
	return out
}

func (s *Leases) invisibleOf(org, group string) []string {
	var ids []string
	for id, l := range s.invisible {
		if l.OrganizationUUID == org && l.RunnerGroupUUID == group {
			ids = append(ids, id)
		}
	}
	return ids
}

// ScanActive is LeaseStore.ScanActive.
func (s *Leases) ScanActive(ctx context.Context, org, group string, after *ledger.Cursor, limit int) ([]ledger.WorkspaceLease, error) {
	if err := s.enter(ctx, "ScanActive", ""); err != nil {
		return nil, fmt.Errorf("scan active leases of group %s: %w", group, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var from *key
	if after != nil {
		from = &key{after.At, after.ID}
	}
	out := page(s.active(org, group), func(l ledger.WorkspaceLease) key { return key{l.HeartbeatAt, l.UUID} }, from, limit)
	for i, l := range out {
		if l.Malformed != "" {
			out[i] = ledger.WorkspaceLease{UUID: l.UUID, HeartbeatAt: l.HeartbeatAt, Malformed: l.Malformed}
		}
	}
	return out, nil
}

// Instances is LeaseStore.Instances: a missing id is absent from the result.
func (s *Leases) Instances(ctx context.Context, ids []string) (map[string]ledger.RunnerInstance, error) {
	if err := s.enter(ctx, "Instances", ""); err != nil {
		return nil, fmt.Errorf("read runner instances: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]ledger.RunnerInstance{}
	for _, id := range slices.Compact(slices.Sorted(slices.Values(ids))) {
		if in, ok := s.instances[id]; ok {
			out[id] = in
		}
	}
	return out, nil
}

// CountActive is LeaseStore.CountActive: invisible leases are active too, and never stale.
func (s *Leases) CountActive(ctx context.Context, org, group string, before time.Time) (int64, error) {
	if err := s.enter(ctx, "CountActive", ""); err != nil {
		return 0, fmt.Errorf("%s of group %s: %w", countWhat(before, "count active leases", "count stale leases"), group, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if before.IsZero() {
		return int64(len(s.active(org, group)) + len(s.invisibleOf(org, group))), nil
	}
	var n int64
	for _, l := range s.active(org, group) {
		if l.HeartbeatAt.Before(before) {
			n++
		}
	}
	return n, nil
}

// Invisible is LeaseStore.Invisible.
func (s *Leases) Invisible(ctx context.Context, org, group string) (ledger.Invisible, error) {
	if err := s.enter(ctx, "Invisible", ""); err != nil {
		return ledger.Invisible{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return invisible(s.invisibleOf(org, group)), nil
}

// AbandonLease is LeaseStore.AbandonLease: one critical section re-reads the lease, the
// organization reads names (its sweeps_enabled: a missing organization is not enabled) and the
// lease's holder (resolved only when it exists in the lease's organization and group), refuses
// ledger.LeftPaused when a pause of reads.Pauses holds, hands them to decide otherwise, and
// writes only what decide returns: a refusal writes nothing, nil keeps the lease, a settlement
// abandons it. A missing lease is kept; one that does not decode fails.
func (s *Leases) AbandonLease(ctx context.Context, leaseID string, reads ledger.Reads, decide func(ledger.WorkspaceLease, ledger.HolderView, ledger.Facts) (*ledger.Settlement, string)) (bool, string, error) {
	if err := s.settling(ctx, "AbandonLease", leaseID); err != nil {
		return false, "", fmt.Errorf("abandon lease %s: %w", leaseID, err)
	}
	return s.abandonLease(leaseID, reads, decide, false)
}

// PreviewAbandonLease is LeaseStore.PreviewAbandonLease: AbandonLease's reads and decision, and
// no write.
func (s *Leases) PreviewAbandonLease(ctx context.Context, leaseID string, reads ledger.Reads, decide func(ledger.WorkspaceLease, ledger.HolderView, ledger.Facts) (*ledger.Settlement, string)) (bool, string, error) {
	if err := s.enter(ctx, "PreviewAbandonLease", leaseID); err != nil {
		return false, "", fmt.Errorf("preview abandoning lease %s: %w", leaseID, err)
	}
	return s.abandonLease(leaseID, reads, decide, true)
}

// abandonLease is AbandonLease's critical section; a preview decides and writes nothing.
func (s *Leases) abandonLease(leaseID string, reads ledger.Reads, decide func(ledger.WorkspaceLease, ledger.HolderView, ledger.Facts) (*ledger.Settlement, string), preview bool) (bool, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.leases[leaseID]
	switch {
	case !ok:
		return false, "", nil
	case l.Malformed != "":
		return false, "", fmt.Errorf("abandon lease %s: decode: %s", leaseID, l.Malformed)
	}
	var facts ledger.Facts
	if reads.Organization != "" {
		facts.OrganizationEnabled = s.organizations[reads.Organization]
	}
	if facts.Pauses = s.read(reads.Pauses); s.holding(reads.Pauses) != nil {
		return false, string(ledger.LeftPaused), nil
	}
	var view ledger.HolderView
	if in, found := s.instances[l.HolderUUID]; found && l.HolderUUID != "" {
		view = ledger.ResolveHolder(l, in, true)
	}
	st, refused := decide(l, view, facts)
	switch {
	case refused != "":
		return false, refused, nil
	case st == nil:
		return false, "", nil
	case preview:
		return true, "", nil
	}
	l.Status, l.ReleasedAt, l.Settlement = ledger.LeaseAbandoned, st.At, st
	s.leases[leaseID] = l
	return true, "", nil
}

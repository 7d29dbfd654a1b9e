package memstore

import (
	"sync"
	"time"

	"github.com/stalesweep/stalesweep/internal/workflow/pausestore"
)

// Pauses are sweep_pauses in memory: a settling call reads the ones its caller names with its
// row, in its critical section, as the ledger's transaction does, and writes nothing when one
// holds (ledger.LeftPaused).
type Pauses struct {
	// Now is the time a pause's end is judged at; time.Now when nil.
	Now func() time.Time

	mu     sync.Mutex
	pauses map[string]pausestore.Pause // by pausestore.PauseID
}

// PutPause writes p, replacing the pause of the same workflow type and scope.
func (s *Pauses) PutPause(p pausestore.Pause) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pauses == nil {
		s.pauses = map[string]pausestore.Pause{}
	}
	s.pauses[pausestore.PauseID(p.WorkflowType, p.Scope)] = p
}

// read returns the pauses of ids that exist, as pausestore.DecodePauses does.
func (s *Pauses) read(ids []string) []pausestore.Pause {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []pausestore.Pause
	for _, id := range ids {
		if p, ok := s.pauses[id]; ok {
			out = append(out, p)
		}
	}
	return out
}

// holding is the first of the pauses of ids that holds now, or nil.
func (s *Pauses) holding(ids []string) *pausestore.Pause {
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	return pausestore.ActivePause(s.read(ids), now())
}

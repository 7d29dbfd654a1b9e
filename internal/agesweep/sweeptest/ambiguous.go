package sweeptest

import (
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/stalesweep/stalesweep/internal/testkit/fsfaulttest"
)

// AmbiguousCommits are the commits whose answer a settling transaction cannot trust, by name:
// two that landed with their answer lost (the transaction must count the row by what it holds),
// and one that did not land (the run's extra try then settles the row, and the read-back must not
// have counted it first). Each is fresh: one per subtest.
func AmbiguousCommits() map[string]*fsfaulttest.Commits {
	return map[string]*fsfaulttest.Commits{
		"landed, Unavailable":      fsfaulttest.New(codes.Unavailable),
		"landed, DeadlineExceeded": fsfaulttest.New(codes.DeadlineExceeded),
		"lost, DeadlineExceeded":   fsfaulttest.Lost(codes.DeadlineExceeded, nil),
	}
}

// EachAmbiguous runs check, in parallel with t's other tests, once per AmbiguousCommits entry,
// as a parallel subtest named after it.
func EachAmbiguous(t *testing.T, check func(t *testing.T, fault *fsfaulttest.Commits)) {
	t.Parallel()
	for name, fault := range AmbiguousCommits() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			check(t, fault)
		})
	}
}

package functions

import (
	"context"
	"fmt"
	"net/http"
)

// ObserveExecution settles the rows an executor's completion entry names, for a message a log
// sink published to the ends topic (executionsync.Observer): seconds after an execution ended,
// with the sweep as the backstop. An entry that names no row is acknowledged; only a failure of
// stalesweep's own on a young entry asks for redelivery.
func ObserveExecution(w http.ResponseWriter, r *http.Request) {
	servePush(w, r, "ObserveExecution", observeExecution)
}

func observeExecution(ctx context.Context, d delivery) error {
	a, err := deps.Get(ctx)
	if err != nil {
		return fmt.Errorf("observe execution: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, a.SyncBudget())
	defer cancel()
	if _, err := a.Observer.Observe(ctx, d.msg.Data, d.msg.PublishTime, d.log); err != nil {
		return fmt.Errorf("observe execution: %w", err)
	}
	return nil
}

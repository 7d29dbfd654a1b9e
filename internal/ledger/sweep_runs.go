package ledger

// The sweep runs' documents are written by internal/workflow/runstore; their names live here
// because the settling transactions, the indexes and the retention read them too.

// RunsCollection holds one document per workflow run, keyed by its workflow_run_uuid.
const RunsCollection = "sweep_runs"

// GuardsCollection holds one lease per workflow type and scope while a run of it is in progress.
const GuardsCollection = "sweep_guards"

// RunNotable is the run record's field a sync sets when it settles a row lost for the run (the
// pipeline's syncs decide after the run may have finished): the record is then kept notable.
const RunNotable = "notable"

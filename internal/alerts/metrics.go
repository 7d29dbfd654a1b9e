package alerts

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Severities, in Cloud Logging's LogSeverity names, as internal/logging writes them.
const (
	SeverityInfo    = "INFO"
	SeverityWarning = "WARNING"
	SeverityError   = "ERROR"
)

var severityRank = map[string]int{"DEBUG": 100, SeverityInfo: 200, SeverityWarning: 400, SeverityError: 500}

// Label is one metric label, extracted from a jsonPayload field of the event's lines.
type Label struct {
	Key         string // the metric label
	Field       string // the jsonPayload field it is extracted from
	Description string
}

// Alert is when a metric pages: its count summed over Window, across every label, above Threshold.
type Alert struct {
	Threshold int
	Window    time.Duration // the alignment period the count is summed over
	Severity  string        // the policy's severity: CRITICAL, ERROR or WARNING
	// Runbook is the policy's documentation: what the alert means and the commands to run.
	Runbook string
}

// Metric is one logs-based metric: a DELTA INT64 counter of the lines of Event at MinSeverity
// or above whose Where fields hold the given values, labelled by Labels.
type Metric struct {
	Name        string // the metric's id, after the module's name prefix
	Event       Event
	MinSeverity string
	Where       map[string]string // further jsonPayload fields the line must hold, exactly
	Description string
	Labels      []Label
	// Chart is the dashboard widget's title; the chart stacks the count by its first label.
	Chart string
	Alert *Alert // nil: charted, never paging
}

// CloudRunSync is the workflow type of the Cloud Run execution sync (contract.ExecutionSyncCloudRun;
// this package imports nothing of stalesweep's, and a test ties the two).
const CloudRunSync = "runner.execution-sync-stale-cloud-run"

var workflowType = Label{Key: "workflow_type", Field: "workflow_type", Description: "the workflow type of the run that logged it"}

// Metrics is the list. Order is the dashboard's.
var Metrics = []Metric{
	{
		Name: "rows_settled", Event: RowSettled, MinSeverity: SeverityInfo,
		Description: "Rows settled, by workflow, outcome (succeeded, failed, cancelled, lost; abandoned; reclaimed, poisoned) and path (sweep, or event: a completion entry).",
		Labels: []Label{{Key: "outcome", Field: "outcome", Description: "how the row was settled"}, workflowType,
			{Key: "path", Field: "path", Description: "what settled it: a sweep, or the event path"}},
		Chart: "Rows settled, by outcome",
	},
	{
		Name: "rows_lost", Event: RowSettled, MinSeverity: SeverityInfo, Where: map[string]string{"outcome": "lost"},
		Description: "Runner executions settled lost: the executor no longer knew them past the lost grace.",
		Labels:      []Label{workflowType},
		Chart:       "Runner executions settled lost",
		Alert: &Alert{Threshold: 20, Window: time.Hour, Severity: "WARNING", Runbook: "More than 20 runner executions were settled `lost` within an hour: their executor answered NotFound past the lost grace. " +
			"Executions aged out of Cloud Run (1,000 per job, about 7 days) are lost by design; many at once usually mean writers name the wrong project or region. " +
			"Check a row: `stalesweep explain runner_executions/RUNNER_EXECUTION_UUID`; check the targets: `stalesweep executors list`."},
	},
	{
		// The sweep settles a Cloud Run row on the executor's terminal word only when the event
		// path did not within min_age_seconds; Cloud Run always writes the entries it listens
		// for, so many of these mean the path is gone quiet, not that executions stopped ending.
		Name: "event_path_missed", Event: RowSettled, MinSeverity: SeverityInfo,
		Where:       map[string]string{"path": PathSweep, "reason": "executor_terminal", "workflow_type": CloudRunSync},
		Description: "Cloud Run executions that ended and whose rows the sweep settled, not the event path: the completion entries did not reach ObserveExecution, or came before the execution was terminal.",
		Labels:      []Label{workflowType},
		Chart:       "Ended executions the event path missed",
		Alert: &Alert{Threshold: 10, Window: time.Hour, Severity: "WARNING", Runbook: "More than 10 Cloud Run rows in an hour were settled by the sweep on the executor's terminal word: the event path missed them, and rows say so a minute or two late instead of seconds. Nothing is lost: the sweep settles every one. " +
			"Check that the log sink exists and its writer identity may publish to the ends topic (`terraform plan` shows drift), read the entries with the generated filter (`gcloud logging read` with `stalesweep sinks`'s filter), and look at ObserveExecution's logs (docs/operations.md, The event path)."},
	},
	{
		Name: "storm_guard_trips", Event: StormGuardTripped, MinSeverity: SeverityError,
		Description: "Runs the storm guard stopped: they would have settled too large a share of their scope on age alone, and settled none of those rows.",
		Labels:      []Label{workflowType},
		Chart:       "Storm guard trips, by workflow",
		Alert: &Alert{Threshold: 0, Window: 5 * time.Minute, Severity: "ERROR", Runbook: "A sweep refused to settle: too large a share of its scope looked dead at once (a writer stopped stamping, a clock jumped, an outage). Nothing it judged on age alone was settled. " +
			"The run's ERROR line and its record (`sweep_runs/WORKFLOW_RUN_UUID`, `stats.storm_guard`) hold the counts; look at a few of its rows with `stalesweep explain COLLECTION/ID` and at the workers first. Only if they really are gone, run the workflow once with `--override-storm-guard` (docs/operations.md, The storm guard)."},
	},
	{
		Name: "blind_executor_trips", Event: BlindExecutor, MinSeverity: SeverityError,
		Description: "Executor targets judged blind: no row of theirs is settled lost until an operator clears them.",
		Labels:      []Label{{Key: "target", Field: "target", Description: "the executor target judged blind"}},
		Chart:       "Blind executor judgments, by target",
		Alert: &Alert{Threshold: 0, Window: 5 * time.Minute, Severity: "ERROR", Runbook: "An executor target answers NotFound for too many of the executions it should know; none of its rows is settled lost. " +
			"List the targets: `stalesweep executors list`; check the writers' provider references and the executor's project and region; if the executions really are gone, `stalesweep executors clear TARGET` (docs/operations.md, The blind-executor guard)."},
	},
	{
		Name: "invisible_rows", Event: InvisibleRows, MinSeverity: SeverityWarning,
		Description: "Runs that found active rows no scan can see (their time field is missing or not a timestamp): they are never settled.",
		Labels:      []Label{workflowType},
		Chart:       "Runs reporting invisible rows, by workflow",
		Alert: &Alert{Threshold: 0, Window: 30 * time.Minute, Severity: "WARNING", Runbook: "Active rows lack the timestamp their scan orders by, so no sweep ever settles them. " +
			"The log line names the collection, the field and a sample of ids; `stalesweep explain COLLECTION/ID` on one shows what it holds. A writer must stamp the field (docs/data-model.md)."},
	},
	{
		Name: "runs_failed", Event: RunFailed, MinSeverity: SeverityError,
		Description: "Workflow runs that ended failed, by workflow and failure reason.",
		Labels:      []Label{workflowType, {Key: "failure_reason", Field: "failure_reason", Description: "the run's failure_reason"}},
		Chart:       "Failed runs, by workflow",
		Alert: &Alert{Threshold: 2, Window: 15 * time.Minute, Severity: "ERROR", Runbook: "Workflow runs are failing. The metric's failure_reason label says why; each failed run's record (`sweep_runs/WORKFLOW_RUN_UUID`, from its ERROR line `workflow run failed`) holds failed_step, failed_layer and error. " +
			"Transient executor or Firestore errors clear on the next tick; storm_guard has its own alert; `stalesweep explain COLLECTION/ID` says what a row's workflow makes of it."},
	},
	{
		Name: "dispatch_deferred", Event: DispatchDeferred, MinSeverity: SeverityWarning,
		Description: "Dispatches that ran out of budget before publishing every scope of their tick.",
		Labels:      []Label{workflowType},
		Chart:       "Dispatch deferrals, by workflow",
		Alert: &Alert{Threshold: 2, Window: time.Hour, Severity: "WARNING", Runbook: "Dispatches run out of budget before publishing every sweep: the tick is redelivered, and scopes are swept late. " +
			"Check Pub/Sub publish latency, or raise the dispatch function's timeout (the module's function_settings; its budget is 80% of it) (docs/operations.md, Budgets)."},
	},
	{
		Name: "dispatch_capped", Event: DispatchCapped, MinSeverity: SeverityWarning,
		Description: "Dispatches whose list of queues or runner groups stopped at its limit: the rest are not swept.",
		Labels:      []Label{workflowType},
		Chart:       "Dispatch lists capped, by workflow",
		Alert: &Alert{Threshold: 0, Window: time.Hour, Severity: "WARNING", Runbook: "A dispatch listed queues or runner groups up to its list limit; the rest are never swept. " +
			"The limit is pipeline.ListMaxDefault (10,000 per list); the log line names the workflow and, for runner groups, the organization (docs/operations.md)."},
	},
}

// Filter is the metric's logs filter after the resource. A dry run's lines (dry_run: true, on every
// line of one) are never counted: a preview settles, trips and fails nothing.
func (m Metric) Filter() string {
	parts := []string{
		fmt.Sprintf("jsonPayload.%s=%q", Key, m.Event),
		"severity>=" + m.MinSeverity,
		"NOT jsonPayload.dry_run=true",
	}
	for _, k := range slices.Sorted(maps.Keys(m.Where)) {
		parts = append(parts, fmt.Sprintf("jsonPayload.%s=%q", k, m.Where[k]))
	}
	return strings.Join(parts, " AND ")
}

// Matches reports whether m counts a decoded log line, and which of the fields m extracts it lacks.
func (m Metric) Matches(line map[string]any) (counted bool, missing []string) {
	if line[Key] != string(m.Event) || line["dry_run"] == true {
		return false, nil
	}
	sev, _ := line["severity"].(string)
	if severityRank[sev] < severityRank[m.MinSeverity] {
		return false, nil
	}
	for k, v := range m.Where {
		if line[k] != v {
			return false, nil
		}
	}
	for _, l := range m.Labels {
		if s, ok := line[l.Field].(string); !ok || s == "" {
			missing = append(missing, l.Field)
		}
	}
	return true, missing
}

package contract

import (
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync"
)

// WorkflowType names a workflow exactly as its seed document does.
type WorkflowType string

// The workflow types the seeds define.
const (
	ExecutionSyncCloudRun   WorkflowType = "runner.execution-sync-stale-cloud-run"  // seed 003
	ExecutionSyncKubernetes WorkflowType = "runner.execution-sync-stale-kubernetes" // seed 002
	WorkspaceLeaseSettle    WorkflowType = "runner.workspace-lease-settle"          // seed 004
	ExtensionRunsSweep      WorkflowType = "platform.extension.runs.sweep"          // seed 000
	PMSweep                 WorkflowType = "pm.sweep"                               // seed 001
)

// Seeded lists every workflow type with an input schema, sorted; whether a process runs one is its engine's to say.
var Seeded = sync.OnceValue(func() []WorkflowType {
	names, _ := fs.Glob(schemaFiles, "schemas/*.json")
	out := make([]WorkflowType, 0, len(names))
	for _, n := range names {
		out = append(out, WorkflowType(strings.TrimSuffix(path.Base(n), ".json")))
	}
	slices.Sort(out)
	return out
})

// Known reports whether a seed defines t.
func (t WorkflowType) Known() bool { return slices.Contains(Seeded(), t) }

// ScopeKind is what one run of a workflow covers.
type ScopeKind string

// The scope kinds.
const (
	ScopeOrganization ScopeKind = "organization" // one organization_uuid
	ScopeRunnerGroup  ScopeKind = "runner_group" // one runner_group_uuid of one organization
	ScopeQueue        ScopeKind = "queue"        // one task queue
	ScopeFleet        ScopeKind = "fleet"        // everything, in one run
)

package contract

import (
	"encoding/json"
	"slices"
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

// Seeded lists every workflow type a seed defines, implemented in this build or not.
func Seeded() []WorkflowType {
	return []WorkflowType{ExecutionSyncCloudRun, ExecutionSyncKubernetes, WorkspaceLeaseSettle, ExtensionRunsSweep, PMSweep}
}

// WorkflowTypes lists the workflow types this build implements: those with an input schema.
func WorkflowTypes() []WorkflowType {
	var out []WorkflowType
	for _, t := range Seeded() {
		if _, err := schemaFiles.Open(SchemaPath(t)); err == nil {
			out = append(out, t)
		}
	}
	return out
}

// Known reports whether a seed defines t.
func (t WorkflowType) Known() bool { return slices.Contains(Seeded(), t) }

// Implemented reports whether this build can run t.
func (t WorkflowType) Implemented() bool { return slices.Contains(WorkflowTypes(), t) }

// ReachableFromRequest reports whether t may be started by a request on the wire (the HTTP
// face). platform.extension.runs.sweep may not: its deadline comes from the caller, unclamped,
// so on the wire it would be a fleet-wide kill switch (seed 000).
func (t WorkflowType) ReachableFromRequest() bool { return t != ExtensionRunsSweep }

// ScopeKind is what one run of a workflow covers.
type ScopeKind string

// The scope kinds.
const (
	ScopeOrganization ScopeKind = "organization" // one organization_uuid
	ScopeRunnerGroup  ScopeKind = "runner_group" // one runner_group_uuid of one organization
	ScopeQueue        ScopeKind = "queue"        // one task queue
	ScopeFleet        ScopeKind = "fleet"        // everything, in one run
)

// ScopeOf returns what one run of t covers and the input fields that name the scope (in
// order; none for the fleet).
func ScopeOf(t WorkflowType) (ScopeKind, []string) {
	switch t {
	case ExecutionSyncCloudRun, ExecutionSyncKubernetes:
		return ScopeOrganization, []string{"organization_uuid"}
	case WorkspaceLeaseSettle:
		return ScopeRunnerGroup, []string{"organization_uuid", "runner_group_uuid"}
	case PMSweep:
		return ScopeQueue, []string{"queue"}
	default:
		return ScopeFleet, nil
	}
}

// Organization returns the organization a validated input of t is scoped to, when t's scope is
// an organization or one of its runner groups.
func Organization(t WorkflowType, input json.RawMessage) (string, bool) {
	_, fields := ScopeOf(t)
	if !slices.Contains(fields, "organization_uuid") {
		return "", false
	}
	var in struct {
		OrganizationUUID string `json:"organization_uuid"`
	}
	if err := json.Unmarshal(input, &in); err != nil || in.OrganizationUUID == "" {
		return "", false
	}
	return in.OrganizationUUID, true
}

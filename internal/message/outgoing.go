package message

import (
	"encoding/json"
	"fmt"
)

// The attributes stalesweep's own messages carry. A tick's are the publisher's (Cloud
// Scheduler's, or an operator's): only AttrTrigger and AttrActor are read from it, and the
// actor only as a claim.
const (
	AttrTrigger             = "trigger"               // schedule | manual
	AttrActor               = "actor"                 // who asked, where known (a claim)
	AttrWorkflowRunUUID     = "workflow_run_uuid"     // the run a sweep or sync message belongs to
	AttrTickID              = "tick_id"               // the tick a sweep message came from
	AttrWorkflowType        = "workflow_type"         // for filtering and logs
	AttrRunnerExecutionUUID = "runner_execution_uuid" // on sync messages
	AttrDispatchAfter       = "dispatch_after"        // on a tick's continuation: the organization to resume after
	AttrRoster              = "roster"                // on a tick's continuation: "build" while the tick builds the roster
)

// Outgoing is one message to publish: its data and attributes.
type Outgoing struct {
	Data       []byte
	Attributes map[string]string
}

// SweepAttributes are a sweep message's attributes.
type SweepAttributes struct {
	Trigger         string // schedule | manual
	ClaimedActor    string // who the tick says sent it; unverified, omitted when empty
	WorkflowRunUUID string // the run the message starts
	TickID          string // the tick it came from
}

// EncodeSweep is the message on the sweeps topic that starts one run: s as its data (what
// ParseStart reads back), and its attributes.
func EncodeSweep(s Start, a SweepAttributes) (Outgoing, error) {
	data, err := json.Marshal(s)
	if err != nil {
		return Outgoing{}, fmt.Errorf("encode sweep message: %w", err)
	}
	attrs := map[string]string{
		AttrTrigger:         a.Trigger,
		AttrWorkflowType:    string(s.WorkflowType),
		AttrWorkflowRunUUID: a.WorkflowRunUUID,
		AttrTickID:          a.TickID,
	}
	if a.ClaimedActor != "" {
		attrs[AttrActor] = a.ClaimedActor
	}
	return Outgoing{Data: data, Attributes: attrs}, nil
}

// ContinuationAttributes are a tick continuation's attributes.
type ContinuationAttributes struct {
	Trigger      string // the tick's
	ClaimedActor string // the tick's claim, omitted when empty
	TickID       string // the tick's own id: the runs are named after it
	After        string // the organization the dispatch resumes after
	Roster       string // RosterBuild while the tick builds the roster of organizations; else empty
}

// RosterBuild is AttrRoster's value on the continuations of a tick that is building the roster.
const RosterBuild = "build"

// EncodeContinuation is the message on the ticks topic that hands the rest of a tick to the next
// Dispatch invocation: the tick's data, with where to resume in its attributes (Continuation).
func EncodeContinuation(s Start, a ContinuationAttributes) (Outgoing, error) {
	if a.TickID == "" || a.After == "" {
		return Outgoing{}, fmt.Errorf("encode tick continuation: the tick id and where to resume are required")
	}
	data, err := json.Marshal(s)
	if err != nil {
		return Outgoing{}, fmt.Errorf("encode tick continuation: %w", err)
	}
	attrs := map[string]string{AttrTrigger: a.Trigger, AttrWorkflowType: string(s.WorkflowType), AttrTickID: a.TickID, AttrDispatchAfter: a.After}
	if a.ClaimedActor != "" {
		attrs[AttrActor] = a.ClaimedActor
	}
	if a.Roster != "" {
		attrs[AttrRoster] = a.Roster
	}
	return Outgoing{Data: data, Attributes: attrs}, nil
}

// Resume is where a tick message has Dispatch start.
type Resume struct {
	TickID string
	After  string
	Roster string
}

// Continuation reads a tick message's attributes: a continuation's tick id, resume point and
// roster attribute, or for a first delivery messageID alone. A continuation without its tick's
// id, or with a roster attribute other than RosterBuild, is malformed.
func Continuation(attrs map[string]string, messageID string) (Resume, error) {
	after := attrs[AttrDispatchAfter]
	if after == "" {
		return Resume{TickID: messageID}, nil
	}
	if attrs[AttrTickID] == "" {
		return Resume{}, fmt.Errorf("a tick continuation (%s=%q) without %s", AttrDispatchAfter, after, AttrTickID)
	}
	if r := attrs[AttrRoster]; r != "" && r != RosterBuild {
		return Resume{}, fmt.Errorf("a tick continuation with %s=%q (want %q or none)", AttrRoster, r, RosterBuild)
	}
	return Resume{TickID: attrs[AttrTickID], After: after, Roster: attrs[AttrRoster]}, nil
}

// EncodeSync is the message on the syncs topic that asks for one row's sync: s as its data
// (what ParseSync reads back), its run and row as attributes.
func EncodeSync(s Sync) Outgoing {
	data, _ := json.Marshal(s) // a Sync always encodes: strings, a time, a map decoded from JSON
	return Outgoing{Data: data, Attributes: map[string]string{
		AttrWorkflowRunUUID:     s.WorkflowRunUUID,
		AttrRunnerExecutionUUID: s.RunnerExecutionUUID,
	}}
}

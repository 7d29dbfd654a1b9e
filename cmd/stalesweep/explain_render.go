package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/stalesweep/stalesweep/internal/explain"
)

// writeExplanation renders e for a human.
func writeExplanation(w io.Writer, e explain.Explanation) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s/%s (%s", e.Collection, e.ID, e.WorkflowType)
	if e.Scope != "" {
		fmt.Fprintf(&b, ", scope %s", e.Scope)
	}
	b.WriteString(")\n\n")
	if e.Visible {
		b.WriteString("A scan sees it now:\n")
	} else {
		b.WriteString("A scan does NOT see it now:\n")
	}
	for _, c := range e.Checks {
		mark := "ok  "
		if !c.OK {
			mark = "FAIL"
		}
		fmt.Fprintf(&b, "  %s %-22s %s\n", mark, c.Name, c.Detail)
	}
	b.WriteString("\n")
	switch x := e.Executor; {
	case x == nil:
		b.WriteString("Executor: not asked\n")
	case x.Error != "":
		fmt.Fprintf(&b, "Executor (%s): call failed: %s\n", x.Target, x.Error)
	default:
		fmt.Fprintf(&b, "Executor (%s): %s", x.Target, x.Verdict)
		if x.Reason != "" {
			fmt.Fprintf(&b, " (%s)", x.Reason)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "Verdict: %s", e.Verdict)
	if e.Outcome != "" {
		fmt.Fprintf(&b, " as %s", e.Outcome)
	}
	fmt.Fprintf(&b, "  (rule: %s)\n", e.Rule)
	if e.Detail != "" {
		fmt.Fprintf(&b, "  %s\n", e.Detail)
	}
	if len(e.Last) > 0 {
		b.WriteString("\nLast recorded by stalesweep:\n")
		writeFields(&b, e.Last, "  ")
	}
	b.WriteString("\nThe row as stored:\n")
	writeFields(&b, e.Row, "  ")
	_, err := io.WriteString(w, b.String())
	return err
}

func writeFields(b *strings.Builder, m map[string]any, indent string) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v, err := json.Marshal(m[k])
		if err != nil {
			v = []byte(fmt.Sprint(m[k]))
		}
		fmt.Fprintf(b, "%s%s: %s\n", indent, k, v)
	}
}

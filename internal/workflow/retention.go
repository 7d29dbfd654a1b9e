package workflow

// Notable says whether a finished run is kept for the notable retention rather than the
// ordinary one (ledger.Retention): it failed (the storm guard fails its run, as does any error),
// it settled a row lost (stats.settled.lost), or the blind-executor guard held lost settlements
// back (stats.blind). It reads the stats as the run record stores them, so it holds for every
// workflow: the ones that settle nothing lost carry neither field.
func Notable(status string, stats map[string]any) bool {
	if status == StateFailed {
		return true
	}
	if settled, ok := stats["settled"].(map[string]any); ok && positive(settled["lost"]) {
		return true
	}
	if blind, ok := stats["blind"].(map[string]any); ok {
		for _, n := range blind {
			if positive(n) {
				return true
			}
		}
	}
	return false
}

// positive reports whether a stored count is above zero.
func positive(v any) bool {
	switch n := v.(type) {
	case int64:
		return n > 0
	case float64:
		return n > 0
	case int:
		return n > 0
	}
	return false
}

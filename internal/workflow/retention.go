package workflow

// Notable says whether a finished run is kept for the notable retention: it failed, or its stats
// count settled.lost or blind rows.
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

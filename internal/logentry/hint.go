package logentry

// Hint is what a completion entry says: which execution it names, and how the row that tracks
// it is found. It is a hint: the executor, asked about the row's own provider_ref, decides.
type Hint struct {
	Provider string // the ledger's provider of the rows it concerns ("cloud_run", "kubernetes")
	// RefKey is the provider_ref field the row is found by, and RefValues the values that name
	// this execution there (a Cloud Run execution may be named by project id or number).
	RefKey    string
	RefValues []string
	InsertID  string
	Log       string // the entry's logName
	Said      string // what the entry says happened (its method or reason), for the log
}

// Ignored is an entry that names no execution a row could track: acknowledged, logged with
// Reason, and never retried.
type Ignored struct {
	Reason string
	Detail string
}

func (i *Ignored) Error() string { return "log entry ignored: " + i.Reason + ": " + i.Detail }

// The reasons an entry is ignored.
const (
	IgnoredUnreadable = "unreadable"   // not a LogEntry
	IgnoredUnmatched  = "unmatched"    // the sink's filter would not have let it through
	IgnoredNoName     = "no_execution" // it names no execution
)

// Signal is one executor's completion signal: the sink filter that chooses its entries and the
// reading of one.
type Signal struct {
	Provider string
	Filter   Filter
	Read     func(Entry) (Hint, error) // called on an entry Filter matches; errors are *Ignored
}

// Read reads data as the entry of the first of signals whose filter matches it.
func Read(data []byte, signals ...Signal) (Hint, error) {
	e, err := Decode(data)
	if err != nil {
		return Hint{}, &Ignored{Reason: IgnoredUnreadable, Detail: err.Error()}
	}
	for _, s := range signals {
		if s.Filter.Match(e) {
			h, err := s.Read(e)
			if err != nil {
				return Hint{}, err
			}
			h.Provider, h.InsertID, h.Log = s.Provider, e.InsertID(), e.Get("logName")
			return h, nil
		}
	}
	return Hint{}, &Ignored{Reason: IgnoredUnmatched, Detail: "log " + e.LogID() + ", resource " + e.Get("resource.type")}
}

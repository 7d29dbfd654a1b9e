package message

import (
	"github.com/stalesweep/stalesweep/internal/executionsync"
)

// ParseSync reads the data of a message on the syncs topic: exactly one JSON object of an
// executionsync.SyncRequest, no unknown fields, at most MaxBodyBytes, and valid
// (SyncRequest.Validate). The syncs topic is written by Sweep only, but it is still a topic: a
// message on it is outside input until it has passed here.
//
// On a rejection the request holds whatever was decoded, so the log can name the row.
func ParseSync(raw []byte) (executionsync.SyncRequest, error) {
	var req executionsync.SyncRequest
	if err := decodeOne(raw, &req); err != nil {
		return req, err
	}
	return req, req.Validate()
}

package cloudrunfake

import (
	"encoding/json"
	"fmt"
	"io"

	"cloud.google.com/go/run/apiv2/runpb"
	"google.golang.org/protobuf/encoding/protojson"
)

// maxExecutionsFile bounds what LoadExecutions reads.
const maxExecutionsFile = 64 << 20

// LoadExecutions reads a JSON array of executions in the protobuf JSON form of
// google.cloud.run.v2.Execution (protojson: camelCase or original field names, enum names,
// RFC 3339 timestamps). Each element must carry a valid execution name.
func LoadExecutions(r io.Reader) ([]*runpb.Execution, error) {
	raw, err := io.ReadAll(io.LimitReader(r, maxExecutionsFile+1))
	if err != nil {
		return nil, fmt.Errorf("read executions: %w", err)
	}
	if len(raw) > maxExecutionsFile {
		return nil, fmt.Errorf("read executions: file larger than %d bytes", maxExecutionsFile)
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, fmt.Errorf("parse executions: want a JSON array: %w", err)
	}
	out := make([]*runpb.Execution, 0, len(items))
	for i, item := range items {
		e := &runpb.Execution{}
		if err := protojson.Unmarshal(item, e); err != nil {
			return nil, fmt.Errorf("parse executions[%d]: %w", i, err)
		}
		if _, err := parseExecution(e.GetName()); err != nil {
			return nil, fmt.Errorf("parse executions[%d].name: %w", i, err)
		}
		out = append(out, e)
	}
	return out, nil
}

// MarshalExecutions writes executions in the form LoadExecutions reads.
func MarshalExecutions(execs []*runpb.Execution) ([]byte, error) {
	items := make([]json.RawMessage, len(execs))
	for i, e := range execs {
		b, err := protojson.Marshal(e)
		if err != nil {
			return nil, fmt.Errorf("marshal executions[%d]: %w", i, err)
		}
		items[i] = b
	}
	return json.MarshalIndent(items, "", "  ")
}

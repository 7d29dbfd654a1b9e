package kubejobs

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// FuzzParseClusters holds STALESWEEP_KUBE_CLUSTERS parsing to what operator configuration
// deserves. ParseClusters returns plain errors by design — the variable is read once when a
// process builds its dependencies, and an operator reads the error, no caller decodes it — so
// the property is: no panic; a rejection names the variable; an accepted configuration says
// exactly one way to reach each cluster (a GKE one with its endpoint and CA), and reads back the
// same from its own encoding. Each input is tried inline and as the content of a file, the two
// forms the variable takes; a value that is not inline JSON is only ever a path the test wrote,
// so fuzzing never reads the machine's files.
func FuzzParseClusters(f *testing.F) {
	for _, s := range []string{
		`{"clusters": {"prod": {"gke": {"endpoint": "10.0.0.1", "ca_data": "Y2E="}}}}`,
		`{"clusters": {"a": {"kubeconfig": "/etc/kube/config", "context": "a"}, "b": {"in_cluster": true},
		  "c": {"host": "https://127.0.0.1:6443", "ca_file": "/ca.pem", "token_file": "/token"}}}`,
		`{"clusters": {"a": {"host": "https://h", "ca_data": "not base64"}}}`,
		`{"clusters": {}}`, `{"clusters": null}`, `{}`,
		`{"clusters": {"a": {}}}`,
		`{"clusters": {"a": {"in_cluster": true, "host": "h"}}}`,
		`{"clusters": {"a": {"gke": {"endpoint": "e"}}}}`,
		`{"clusters": {"a": {"gke": null, "in_cluster": false}}}`,
		`{"clusters": {"": {"in_cluster": true}}}`,
		`{"clusters": {"a": {"in_cluster": true, "extra": 1}}}`,
		`{"clusters": {"a": {"in_cluster": "yes"}}}`,
		`{"clusters": []}`, `{"clusters": {"a": {"in_cluster": true}}} trailing`,
		`  {"clusters": {"a": {"in_cluster": true}}}`, `{`, ``, `null`, `[]`,
	} {
		f.Add(s)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, value string) {
		if strings.HasPrefix(strings.TrimSpace(value), "{") {
			checkClusters(t, value, value)
		}
		path := filepath.Join(dir, "clusters.json")
		if err := os.WriteFile(path, []byte(value), 0o600); err != nil {
			t.Fatal(err)
		}
		checkClusters(t, path, value)
	})
}

// checkClusters parses value (inline JSON or a path to a file holding content).
func checkClusters(t *testing.T, value, content string) {
	t.Helper()
	clusters, err := ParseClusters(value)
	if err != nil {
		if !strings.Contains(err.Error(), ClustersEnv) {
			t.Fatalf("ParseClusters(%q): error %q does not name %s", content, err, ClustersEnv)
		}
		return
	}
	for name, c := range clusters {
		ways := 0
		for _, set := range []bool{c.Kubeconfig != "", c.InCluster, c.GKE != nil, c.Host != ""} {
			if set {
				ways++
			}
		}
		if ways != 1 {
			t.Fatalf("ParseClusters(%q) accepted cluster %q with %d ways to reach it", content, name, ways)
		}
		if c.GKE != nil && (c.GKE.Endpoint == "" || c.GKE.CAData == "") {
			t.Fatalf("ParseClusters(%q) accepted GKE cluster %q without endpoint or ca_data", content, name)
		}
	}
	b, err := json.Marshal(map[string]any{"clusters": clusters})
	if err != nil {
		t.Fatalf("accepted clusters do not encode: %v", err)
	}
	again, err := ParseClusters(string(b))
	if err != nil || !reflect.DeepEqual(again, clusters) {
		t.Fatalf("ParseClusters(%q) = %+v, but its encoding %s reads back as %+v, %v", content, clusters, b, again, err)
	}
}

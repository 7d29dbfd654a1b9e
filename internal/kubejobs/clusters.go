package kubejobs

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"
	batchclient "k8s.io/client-go/kubernetes/typed/batch/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// ClusterConfig says how to reach one cluster. Exactly one way is set.
type ClusterConfig struct {
	// Kubeconfig is a kubeconfig file's path; Context picks a context in it (default: current).
	Kubeconfig string `json:"kubeconfig,omitempty"`
	Context    string `json:"context,omitempty"`
	// InCluster uses the service account of the pod stalesweep runs in.
	InCluster bool `json:"in_cluster,omitempty"`
	// GKE reaches a GKE cluster with an OAuth2 token from Application Default Credentials.
	GKE *GKEConfig `json:"gke,omitempty"`
	// Host, with CAData or CAFile and TokenFile, reaches any API server with a bearer token.
	Host      string `json:"host,omitempty"`
	CAData    string `json:"ca_data,omitempty"` // base64 of the PEM
	CAFile    string `json:"ca_file,omitempty"`
	TokenFile string `json:"token_file,omitempty"`
}

// GKEConfig is a GKE cluster's endpoint and CA (gcloud container clusters describe:
// endpoint, masterAuth.clusterCaCertificate).
type GKEConfig struct {
	Endpoint string `json:"endpoint"`
	CAData   string `json:"ca_data"` // base64 of the PEM, as GKE reports it
}

// ClustersEnv names the variable holding the clusters: inline JSON, or the path of a JSON
// file, of the form {"clusters": {"NAME": ClusterConfig, ...}}.
const ClustersEnv = "STALESWEEP_KUBE_CLUSTERS"

// MaxClustersBytes bounds the clusters configuration, inline or in its file.
const MaxClustersBytes = 1 << 20

// ParseClusters reads ClustersEnv's value, each cluster named and reached exactly one way.
func ParseClusters(value string) (map[string]ClusterConfig, error) {
	raw := []byte(value)
	if t := strings.TrimSpace(value); !strings.HasPrefix(t, "{") {
		b, err := readBounded(t, MaxClustersBytes)
		if err != nil {
			return nil, fmt.Errorf("%s: read %s: %w", ClustersEnv, t, err)
		}
		raw = b
	}
	if len(raw) > MaxClustersBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes", ClustersEnv, MaxClustersBytes)
	}
	var doc struct {
		Clusters map[string]ClusterConfig `json:"clusters"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("%s: %w", ClustersEnv, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%s: must hold exactly one JSON object; found more after it", ClustersEnv)
	}
	names := make([]string, 0, len(doc.Clusters))
	for name := range doc.Clusters {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if strings.TrimSpace(name) == "" {
			return nil, fmt.Errorf("%s: a cluster has an empty name; rows name their cluster by it", ClustersEnv)
		}
		c := doc.Clusters[name]
		ways := 0
		for _, set := range []bool{c.Kubeconfig != "", c.InCluster, c.GKE != nil, c.Host != ""} {
			if set {
				ways++
			}
		}
		if ways != 1 {
			return nil, fmt.Errorf("%s: cluster %q: set exactly one of kubeconfig, in_cluster, gke, host (found %d)", ClustersEnv, name, ways)
		}
		if c.GKE != nil && (c.GKE.Endpoint == "" || c.GKE.CAData == "") {
			return nil, fmt.Errorf("%s: cluster %q: gke needs endpoint and ca_data", ClustersEnv, name)
		}
		if c.Host != "" {
			if err := checkHost(c); err != nil {
				return nil, fmt.Errorf("%s: cluster %q: %w", ClustersEnv, name, err)
			}
		}
	}
	return doc.Clusters, nil
}

// checkHost refuses a host that could be answered by anything but the cluster: a non-loopback
// host needs https and a token, else a plain-HTTP host answering 404 would say every Job is gone.
func checkHost(c ClusterConfig) error {
	u, err := url.Parse(c.Host)
	if err != nil || u.Host == "" {
		return fmt.Errorf("host %q is not a URL (https://HOST:PORT)", c.Host)
	}
	if h := u.Hostname(); h == "localhost" || net.ParseIP(h) != nil && net.ParseIP(h).IsLoopback() {
		return nil
	}
	if u.Scheme != "https" || c.TokenFile == "" {
		return fmt.Errorf("host %q is not loopback: it needs https and token_file (and ca_data or ca_file unless the server's certificate is publicly trusted)", c.Host)
	}
	return nil
}

// readBounded reads a file, reading at most limit+1 bytes of one larger (or endless, a device).
func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("larger than %d bytes", limit)
	}
	return b, nil
}

// RESTConfig builds the client configuration of one cluster, with client's limits.
func (c ClusterConfig) RESTConfig(ctx context.Context, client ClientConfig) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	switch {
	case c.Kubeconfig != "":
		rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: c.Kubeconfig}
		cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: c.Context}).ClientConfig()
	case c.InCluster:
		cfg, err = rest.InClusterConfig()
	case c.GKE != nil:
		var ca []byte
		if ca, err = base64.StdEncoding.DecodeString(c.GKE.CAData); err != nil {
			return nil, fmt.Errorf("gke ca_data: %w", err)
		}
		ts, terr := google.DefaultTokenSource(ctx, "https://www.googleapis.com/auth/cloud-platform")
		if terr != nil {
			return nil, fmt.Errorf("gke token source: %w", terr)
		}
		host := c.GKE.Endpoint
		if !strings.HasPrefix(host, "https://") {
			host = "https://" + host
		}
		cfg = &rest.Config{Host: host, TLSClientConfig: rest.TLSClientConfig{CAData: ca}}
		cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
			return &oauth2.Transport{Source: ts, Base: rt}
		}
	default:
		cfg = &rest.Config{Host: c.Host, BearerTokenFile: c.TokenFile, TLSClientConfig: rest.TLSClientConfig{CAFile: c.CAFile}}
		if c.CAData != "" {
			if cfg.CAData, err = base64.StdEncoding.DecodeString(c.CAData); err != nil {
				return nil, fmt.Errorf("ca_data: %w", err)
			}
		}
	}
	if err != nil {
		return nil, err
	}
	client.WithDefaults().apply(cfg)
	cfg.UserAgent = "stalesweep"
	return cfg, nil
}

// Set is the configured clusters. Each cluster's client is built on first use; a failed build
// is tried again on the next use.
type Set struct {
	configs map[string]ClusterConfig
	client  ClientConfig

	mu      sync.Mutex
	clients map[string]func(namespace string) JobGetter
}

// SetConfig is what a Set is built from.
type SetConfig struct {
	Clusters map[string]ClusterConfig
	// Client is how Clusters' clients reach them.
	Client ClientConfig
	// Ready are batch/v1 clients ready to use (a fake clientset's BatchV1(), say), by cluster
	// name. Their requests are their own: Client does not reach them.
	Ready map[string]batchclient.BatchV1Interface
}

// NewSet returns the clusters c describes.
func NewSet(c SetConfig) *Set {
	s := &Set{configs: c.Clusters, client: c.Client.WithDefaults(), clients: map[string]func(string) JobGetter{}}
	for name, bc := range c.Ready {
		s.clients[name] = func(namespace string) JobGetter { return bc.Jobs(namespace) }
	}
	return s
}

// Jobs returns the Jobs of a namespace on a named cluster.
func (s *Set) Jobs(cluster, namespace string) (JobGetter, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.clients[cluster]
	if !ok {
		cc, known := s.configs[cluster]
		if !known {
			return nil, fmt.Errorf("%w: %q", ErrUnknownCluster, cluster)
		}
		cfg, err := cc.RESTConfig(context.Background(), s.client)
		if err != nil {
			return nil, fmt.Errorf("configure cluster %q: %w", cluster, err)
		}
		// The batch/v1 client alone: the full clientset would add every API group to the binary.
		bc, err := batchclient.NewForConfig(cfg)
		if err != nil {
			return nil, fmt.Errorf("connect to cluster %q: %w", cluster, err)
		}
		rc, retries := bc.RESTClient(), s.client.ClientRetries
		c = func(namespace string) JobGetter { return restJobs{client: rc, namespace: namespace, retries: retries} }
		s.clients[cluster] = c
	}
	return c(namespace), nil
}

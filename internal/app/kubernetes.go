//go:build !nokubernetes

package app

import (
	"github.com/stalesweep/stalesweep/internal/kubejobs"
)

// KubernetesBuilt says whether this build syncs Kubernetes Jobs. client-go adds about 32 MB to
// a binary (docs/performance.md); build with -tags nokubernetes to leave it out.
const KubernetesBuilt = true

// kubernetesExecutor is the Kubernetes Jobs adapter over the clusters of
// STALESWEEP_KUBE_CLUSTERS. With none configured every Kubernetes row's sync errors with
// "cluster not configured": counted and logged, nothing settled.
func kubernetesExecutor(cfg Config) (syncExecutor, error) {
	clusters := map[string]kubejobs.ClusterConfig{}
	if cfg.KubeClusters != "" {
		var err error
		if clusters, err = kubejobs.ParseClusters(cfg.KubeClusters); err != nil {
			return nil, err
		}
	}
	client := kubejobs.ClientConfig{
		Timeout: cfg.CloudRun.CallTimeout, QPS: float32(cfg.KubeQPS), Burst: cfg.KubeBurst, ClientRetries: cfg.KubeClientRetries,
	}
	return kubejobs.New(kubejobs.NewSet(kubejobs.SetConfig{Clusters: clusters, Client: client}), kubejobs.Config{CallTimeout: cfg.CloudRun.CallTimeout}), nil
}

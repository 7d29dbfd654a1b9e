//go:build nokubernetes

package app

// KubernetesBuilt says whether this build syncs Kubernetes Jobs; this one, built with
// -tags nokubernetes, does not, and carries no client-go.
const KubernetesBuilt = false

func kubernetesExecutor(Config) (syncExecutor, error) { return nil, nil }

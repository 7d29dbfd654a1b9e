package kubejobs

// IAMPermissions lists the Google Cloud IAM permissions the adapter needs to reach a GKE cluster
// with the function's own identity: the GKE endpoint refuses an IAM-authenticated caller without
// container.clusters.get. Reading the Job itself is granted inside the cluster by RBAC (a Role
// with get on batch/jobs, docs/operations.md), not by IAM. The Terraform module's custom role
// holds exactly these with Kubernetes on, and internal/testkit/deploycheck checks it.
var IAMPermissions = []string{"container.clusters.get"}

package kubejobs

// IAMPermissions lists the IAM permissions the adapter needs to reach a GKE cluster: the GKE
// endpoint refuses an IAM-authenticated caller without container.clusters.get. Reading the Job is
// granted by RBAC (docs/operations.md). The Terraform module's role holds exactly these, which
// internal/testkit/deploycheck checks.
var IAMPermissions = []string{"container.clusters.get"}

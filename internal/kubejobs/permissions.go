package kubejobs

// IAMPermissions lists the IAM permissions the adapter needs to reach a GKE cluster, whose
// endpoint refuses an IAM-authenticated caller without container.clusters.get (reading the Job
// is RBAC's). The Terraform module's role holds exactly these; internal/testkit/deploycheck checks.
var IAMPermissions = []string{"container.clusters.get"}

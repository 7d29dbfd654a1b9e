package cloudrun

// IAMPermissions lists the IAM permissions the adapter's calls need: GetExecution only.
// The Terraform module grants the functions' account a custom role with exactly these (plus
// kubejobs.IAMPermissions with Kubernetes), and internal/testkit/deploycheck holds the role to this list.
var IAMPermissions = []string{"run.executions.get"}

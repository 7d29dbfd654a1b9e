package cloudrun

// IAMPermissions lists the IAM permissions the adapter's calls need. The Terraform module's
// custom role holds exactly these (plus kubejobs.IAMPermissions), which
// internal/testkit/deploycheck checks.
var IAMPermissions = []string{"run.executions.get"}

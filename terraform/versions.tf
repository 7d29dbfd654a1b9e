# The providers are pinned to the versions the module is checked against (docs/deploy.md):
# internal/testkit/deploycheck runs terraform validate and plan with their schemas (internal/testkit/tfstandin).
terraform {
  required_version = ">= 1.5"
  required_providers {
    google = {
      source  = "hashicorp/google"
      version = "~> 6.50.0"
    }
    archive = {
      source  = "hashicorp/archive"
      version = "~> 2.7.1"
    }
  }
}

# A complete deployment: `terraform init && terraform apply -var project_id=... -var region=...`
# from this directory (docs/deploy.md).

variable "project_id" {
  type = string
}

variable "region" {
  type    = string
  default = "europe-west1"
}

variable "operators" {
  description = "Who may call StartWorkflow, e.g. [\"user:oncall@example.com\"]."
  type        = list(string)
  default     = []
}

provider "google" {
  project = var.project_id
  region  = var.region
}

module "stalesweep" {
  source                  = "../.."
  project_id              = var.project_id
  region                  = var.region
  start_workflow_invokers = var.operators
  labels                  = { app = "stalesweep" }
}

output "function_uris" {
  value = module.stalesweep.function_uris
}

output "topics" {
  value = module.stalesweep.topics
}

output "service_accounts" {
  value = module.stalesweep.service_accounts
}

output "start_workflow_url" {
  description = "Mint StartWorkflow's ID tokens for this URL (or call it with gcloud functions call --gen2)."
  value       = module.stalesweep.start_workflow_url
}

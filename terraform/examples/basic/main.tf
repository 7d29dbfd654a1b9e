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

variable "pubsub_agent_token_creator" {
  description = "true in a project whose Pub/Sub service agent was created on or before 8 April 2021 (docs/deploy.md)."
  type        = bool
  default     = false
}

variable "enable_kubernetes" {
  description = "Sync Kubernetes Jobs too (docs/deploy.md)."
  type        = bool
  default     = false
}

variable "kube_clusters_secret" {
  description = "With enable_kubernetes: the Secret Manager secret holding the clusters' JSON."
  type        = string
  default     = ""
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

  pubsub_agent_token_creator = var.pubsub_agent_token_creator
  enable_kubernetes          = var.enable_kubernetes
  kube_clusters_secret       = var.kube_clusters_secret
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

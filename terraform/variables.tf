variable "project_id" {
  description = "The project stalesweep runs in (Firestore, Pub/Sub, the functions)."
  type        = string
}

variable "region" {
  description = "Region of the functions, the scheduler jobs and the source bucket."
  type        = string
}

variable "name_prefix" {
  description = "Prefix of every resource name. The operations guide assumes the default."
  type        = string
  default     = "stalesweep"
}

variable "source_dir" {
  description = "The stalesweep module's root (the directory holding go.mod), zipped and uploaded as the functions' source."
  type        = string
  default     = null
}

variable "firestore_database" {
  description = "The Firestore database (it must already exist, in Native mode)."
  type        = string
  default     = "(default)"
}

variable "enable_apis" {
  description = "Enable the APIs the module needs."
  type        = bool
  default     = true
}

variable "enable_kubernetes" {
  description = "Sync Kubernetes Jobs too. When false the functions are built with -tags nokubernetes (half the binary, no client-go) and no Kubernetes schedule or role is created."
  type        = bool
  default     = false
}

variable "kube_clusters" {
  description = "STALESWEEP_KUBE_CLUSTERS inline: the clusters' JSON (see docs/operations.md), for clusters reached with the function's own identity (GKE: no secret in it). Used when enable_kubernetes. Set this or kube_clusters_secret, not both."
  type        = string
  default     = ""
}

variable "kube_clusters_secret" {
  description = "The id (short name, not the full resource name) of a Secret Manager secret in the project holding the STALESWEEP_KUBE_CLUSTERS JSON, for clusters reached with credentials (a token, a kubeconfig). Used when enable_kubernetes: the latest version is mounted into the functions as a file, and only the runtime account may read that one secret. Set this or kube_clusters, not both."
  type        = string
  default     = ""
  validation {
    condition     = can(regex("^[A-Za-z0-9_-]{0,255}$", var.kube_clusters_secret))
    error_message = "kube_clusters_secret must be a secret id of the project (letters, digits, _ and -), not a resource name."
  }
}

variable "retry_policy" {
  description = "Retry policy of the event triggers: RETRY_POLICY_RETRY redelivers a failure worth retrying (for up to 24 h, then dead-letters it when enable_dead_letter); RETRY_POLICY_DO_NOT_RETRY leaves it to the next tick."
  type        = string
  default     = "RETRY_POLICY_RETRY"
  validation {
    condition     = contains(["RETRY_POLICY_RETRY", "RETRY_POLICY_DO_NOT_RETRY"], var.retry_policy)
    error_message = "retry_policy must be RETRY_POLICY_RETRY or RETRY_POLICY_DO_NOT_RETRY."
  }
}

variable "enable_dead_letter" {
  description = "Attach the dead-letter topic to the Eventarc subscriptions of the event functions (with gcloud, at apply time: Eventarc owns those subscriptions)."
  type        = bool
  default     = true
}

variable "max_delivery_attempts" {
  description = "Deliveries of one message before it is dead-lettered."
  type        = number
  default     = 10
}

variable "schedules" {
  description = "One Cloud Scheduler job per workflow type: its cron schedule, the initial_data of every run it starts (defaults; the dispatcher adds each scope), and whether it is enabled."
  type = map(object({
    schedule     = string
    initial_data = any
    enabled      = optional(bool, true)
  }))
  default = {
    "runner.execution-sync-stale-cloud-run" = {
      schedule     = "* * * * *"
      initial_data = { min_age_seconds = 60, limit = 25 }
    }
    "runner.execution-sync-stale-kubernetes" = {
      schedule     = "* * * * *"
      initial_data = { min_age_seconds = 60, limit = 25 }
    }
    "runner.workspace-lease-settle" = {
      schedule     = "*/5 * * * *"
      initial_data = { max_settlements = 50 }
    }
    "platform.extension.runs.sweep" = {
      schedule     = "*/5 * * * *"
      initial_data = { older_than_ms = 900000, limit = 200 }
    }
    "pm.sweep" = {
      schedule     = "*/5 * * * *"
      initial_data = { ttl = 300 }
    }
  }
}

variable "schedule_time_zone" {
  description = "Time zone of the schedules."
  type        = string
  default     = "Etc/UTC"
}

variable "start_workflow_invokers" {
  description = "Principals (user:..., serviceAccount:..., group:...) who may call the manual StartWorkflow function: each gets roles/run.invoker on its service. Users and service accounts are also the function's own allow-list (STALESWEEP_ALLOWED_CALLERS): by email, and a service account also by its numeric unique id, which is all a token minted by impersonation without --include-email carries. A group: entry gets run.invoker but cannot be on that list (ID tokens carry no groups), so its members are refused by the function: list them one by one."
  type        = list(string)
  default     = []
  validation {
    condition     = alltrue([for p in var.start_workflow_invokers : !contains(["allUsers", "allAuthenticatedUsers"], p)])
    error_message = "StartWorkflow is never public: allUsers and allAuthenticatedUsers are refused."
  }
}

variable "accept_gcloud_tokens" {
  description = "StartWorkflow accepts gcloud's own ID tokens (audience: gcloud's OAuth client id 32555940559.apps.googleusercontent.com), which `gcloud functions call --gen2` and `gcloud auth print-identity-token` without --audiences send; Cloud Run's IAM accepts them too. false requires tokens minted for the function's URL (start_workflow_audiences)."
  type        = bool
  default     = true
}

variable "pubsub_agent_token_creator" {
  description = "Let the Pub/Sub service agent mint tokens for the trigger account (roles/iam.serviceAccountTokenCreator on that account only), for Eventarc's authenticated push. Needed only in projects whose Pub/Sub service agent was created on or before 8 April 2021."
  type        = bool
  default     = false
}

variable "function_settings" {
  description = "Per function: timeout (seconds), maximum instances, concurrent requests per instance, memory, and the budget the function keeps under its timeout."
  type = map(object({
    timeout_seconds = number
    max_instances   = number
    concurrency     = number
    memory          = string
  }))
  default = {
    dispatch       = { timeout_seconds = 120, max_instances = 5, concurrency = 1, memory = "512Mi" }
    sweep          = { timeout_seconds = 300, max_instances = 20, concurrency = 1, memory = "512Mi" }
    sync_execution = { timeout_seconds = 120, max_instances = 50, concurrency = 8, memory = "512Mi" }
    start_workflow = { timeout_seconds = 600, max_instances = 2, concurrency = 1, memory = "512Mi" }
    # One query, one GetExecution and one transaction per completion entry.
    observe_execution = { timeout_seconds = 60, max_instances = 20, concurrency = 8, memory = "512Mi" }
  }
}

variable "extension_sweep_floor_ms" {
  description = "The least older_than_ms platform.extension.runs.sweep accepts on the scheduled path."
  type        = number
  default     = 60000
}

variable "pm_ttl_floor_seconds" {
  description = "The least `ttl` pm.sweep accepts off the command line, on the scheduled and HTTP paths (STALESWEEP_PM_TTL_FLOOR_SECONDS)."
  type        = number
  default     = 60
  validation {
    condition     = var.pm_ttl_floor_seconds >= 1 && floor(var.pm_ttl_floor_seconds) == var.pm_ttl_floor_seconds
    error_message = "pm_ttl_floor_seconds must be a whole number of seconds, at least 1."
  }
}

variable "storm_fraction" {
  description = "The storm guard: the largest share of a scope's live rows one run may settle on age alone (runs sweep, pm.sweep, lease settle); above it the run settles none of them and fails with storm_guard. 1 turns the guard off."
  type        = number
  default     = 0.5
  validation {
    condition     = var.storm_fraction > 0 && var.storm_fraction <= 1
    error_message = "storm_fraction must be greater than 0 and at most 1."
  }
}

variable "storm_min_rows" {
  description = "The storm guard: how many rows one run may always settle on age alone, whatever storm_fraction says (small scopes)."
  type        = number
  default     = 10
  validation {
    condition     = var.storm_min_rows >= 1
    error_message = "storm_min_rows must be at least 1."
  }
}

variable "lost_grace" {
  description = "How long an execution may stay unknown to its executor before the row is settled lost (Go duration)."
  type        = string
  default     = "15m"
}

variable "labels" {
  description = "Labels on every resource that takes them."
  type        = map(string)
  default     = {}
}

variable "blind_fraction" {
  description = "The blind-executor guard: an executor target (a Cloud Run project and region, a Kubernetes cluster) is blind when more than this share of the rows it answered about are unknown to it; no row of a blind target is settled lost (docs/operations.md)."
  type        = number
  default     = 0.5
  validation {
    condition     = var.blind_fraction > 0 && var.blind_fraction < 1
    error_message = "blind_fraction must be greater than 0 and less than 1."
  }
}

variable "blind_min_rows" {
  description = "The blind-executor guard: a target that answered about fewer rows than this is never judged blind."
  type        = number
  default     = 10
  validation {
    condition     = var.blind_min_rows >= 1
    error_message = "blind_min_rows must be at least 1."
  }
}

variable "blind_window" {
  description = "The blind-executor guard: the rows a target answered about within this long count (Go duration)."
  type        = string
  default     = "30m"
}

variable "kube_qps" {
  description = "client-go's client-side rate limit per Kubernetes cluster, requests per second (STALESWEEP_KUBE_QPS); -1 turns it off."
  type        = number
  default     = 50
}

variable "kube_burst" {
  description = "client-go's client-side burst per Kubernetes cluster (STALESWEEP_KUBE_BURST)."
  type        = number
  default     = 100
}

variable "kube_client_retries" {
  description = "How many times client-go itself retries one request (on a 429 or 5xx with Retry-After, or a broken GET) before the adapter's own retry policy sees it (STALESWEEP_KUBE_CLIENT_RETRIES). 0 leaves every retry to the policy, so a 429 stops the run's calls at once."
  type        = number
  default     = 0
}

variable "alert_notification_channels" {
  description = "Cloud Monitoring notification channels (ids: projects/PROJECT/notificationChannels/ID) the alert policies of alerts.tf.json notify. Empty: the policies open incidents in the console and notify no one."
  type        = list(string)
  default     = []
}

variable "log_sink_scope" {
  description = "Where the event path's log sink lives: \"project\" (this project's executions), \"folder\" or \"organization\" (runners in several projects; log_sink_parent_id names it, and whoever applies needs roles/logging.configWriter there)."
  type        = string
  default     = "project"
  validation {
    condition     = contains(["project", "folder", "organization"], var.log_sink_scope)
    error_message = "log_sink_scope must be project, folder or organization."
  }
}

variable "log_sink_parent_id" {
  description = "The folder (folders/123 or 123) or organization (numeric id) whose sink feeds the event path, when log_sink_scope is folder or organization."
  type        = string
  default     = ""
}

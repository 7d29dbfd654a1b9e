locals {
  source_dir = coalesce(var.source_dir, abspath("${path.module}/.."))

  # The function targets registered in functions/, each with its trigger topic (null: HTTP).
  # A test holds this map to the targets the code registers.
  functions = {
    dispatch       = { entry_point = "Dispatch", topic = "ticks", budget_env = "STALESWEEP_DISPATCH_BUDGET" }
    sweep          = { entry_point = "Sweep", topic = "sweeps", budget_env = "STALESWEEP_RUN_BUDGET" }
    sync_execution = { entry_point = "SyncExecution", topic = "syncs", budget_env = "STALESWEEP_SYNC_BUDGET" }
    # The event path: the executors' completion entries, from the log sinks (sinks.tf).
    observe_execution = { entry_point = "ObserveExecution", topic = "ends", budget_env = "STALESWEEP_SYNC_BUDGET" }
    start_workflow    = { entry_point = "StartWorkflow", topic = null, budget_env = "STALESWEEP_RUN_BUDGET" }
  }
  event_functions = { for k, f in local.functions : k => f if f.topic != null }

  # The topics the pipeline uses; the code's defaults are these names without the prefix.
  topics = {
    ticks  = "${var.name_prefix}-ticks"
    sweeps = "${var.name_prefix}-sweeps"
    syncs  = "${var.name_prefix}-syncs"
    ends   = "${var.name_prefix}-ends"
  }

  schedules = {
    for type, s in var.schedules : type => s
    if s.enabled && (var.enable_kubernetes || type != "runner.execution-sync-stale-kubernetes")
  }

  # StartWorkflow's callers (STALESWEEP_ALLOWED_CALLERS): the invokers that are users or service
  # accounts, by email, and each service account also by its numeric unique id: a token minted
  # by impersonation (gcloud functions call --impersonate-service-account) has no email claim,
  # only sub = that id. group: entries cannot be listed: ID tokens carry no groups.
  invoker_service_accounts = [
    for p in var.start_workflow_invokers : trimprefix(p, "serviceAccount:") if startswith(p, "serviceAccount:")
  ]
  allowed_callers = distinct(concat(
    [for p in var.start_workflow_invokers : split(":", p)[1] if startswith(p, "user:") || startswith(p, "serviceAccount:")],
    [for email in local.invoker_service_accounts : data.google_service_account.invokers[email].unique_id],
  ))

  # StartWorkflow's own URLs (STALESWEEP_AUTH_AUDIENCE): a token minted for one of them is for
  # this function. Both are deterministic — the cloudfunctions.net URL and Cloud Run's
  # deterministic run.app URL — so the function's environment does not depend on the function
  # itself. Never taken from the request.
  start_workflow_name = "${var.name_prefix}-start-workflow"
  start_workflow_audiences = [
    "https://${var.region}-${var.project_id}.cloudfunctions.net/${local.start_workflow_name}",
    "https://${local.start_workflow_name}-${data.google_project.this.number}.${var.region}.run.app",
  ]

  # Kubernetes clusters: inline (var.kube_clusters), or a Secret Manager secret mounted as a file.
  # The mount shadows its whole directory, so it gets one of its own. Cloud Functions' API
  # recommends /etc/secrets and restricts /cloudsql, /dev/log, /pod, /proc and /var/log
  # (SecretVolume.mount_path); /etc/stalesweep-secrets is under /etc like the recommended path,
  # clear of the restricted ones, and hides nothing the image holds.
  kube_secret            = var.enable_kubernetes && var.kube_clusters_secret != ""
  kube_secret_mount_path = "/etc/stalesweep-secrets"
  kube_secret_file       = "clusters.json"
  kube_clusters = (
    local.kube_secret ? "${local.kube_secret_mount_path}/${local.kube_secret_file}" :
    var.enable_kubernetes ? var.kube_clusters : ""
  )

  common_env = {
    GOOGLE_CLOUD_PROJECT                = var.project_id
    STALESWEEP_FIRESTORE_DATABASE       = var.firestore_database
    STALESWEEP_TOPIC_TICKS              = local.topics.ticks
    STALESWEEP_TOPIC_SWEEPS             = local.topics.sweeps
    STALESWEEP_TOPIC_SYNCS              = local.topics.syncs
    STALESWEEP_LOST_GRACE               = var.lost_grace
    STALESWEEP_EXTENSION_SWEEP_FLOOR_MS = tostring(var.extension_sweep_floor_ms)
    STALESWEEP_STORM_FRACTION           = tostring(var.storm_fraction)
    STALESWEEP_STORM_MIN_ROWS           = tostring(var.storm_min_rows)
    STALESWEEP_BLIND_FRACTION           = tostring(var.blind_fraction)
    STALESWEEP_BLIND_MIN_ROWS           = tostring(var.blind_min_rows)
    STALESWEEP_BLIND_WINDOW             = var.blind_window
    STALESWEEP_PM_TTL_FLOOR_SECONDS     = tostring(var.pm_ttl_floor_seconds)
    STALESWEEP_KUBE_CLUSTERS            = local.kube_clusters
    STALESWEEP_KUBE_QPS                 = tostring(var.kube_qps)
    STALESWEEP_KUBE_BURST               = tostring(var.kube_burst)
    STALESWEEP_KUBE_CLIENT_RETRIES      = tostring(var.kube_client_retries)
  }
}

data "google_project" "this" {
  project_id = var.project_id
}

# The invokers that are service accounts, for their unique ids (local.allowed_callers).
data "google_service_account" "invokers" {
  for_each   = toset(local.invoker_service_accounts)
  account_id = each.value
}

resource "google_project_service" "apis" {
  for_each = var.enable_apis ? toset(concat([
    "artifactregistry.googleapis.com", "cloudbuild.googleapis.com", "cloudfunctions.googleapis.com",
    "cloudscheduler.googleapis.com", "eventarc.googleapis.com", "firestore.googleapis.com",
    "iam.googleapis.com", "logging.googleapis.com", "monitoring.googleapis.com", "pubsub.googleapis.com",
    "run.googleapis.com", "storage.googleapis.com",
  ], local.kube_secret ? ["secretmanager.googleapis.com"] : [])) : toset([])
  project            = var.project_id
  service            = each.value
  disable_on_destroy = false
}

# The functions' source: this module's root, zipped.
data "archive_file" "source" {
  type        = "zip"
  source_dir  = local.source_dir
  output_path = "${path.module}/.build/${var.name_prefix}-source.zip"
  excludes    = [".git", ".ci", "terraform", "docs", "emulator/local-pipeline.sh", "internal/contract/testdata"]
}

resource "google_storage_bucket" "source" {
  project                     = var.project_id
  name                        = "${var.project_id}-${var.name_prefix}-source"
  location                    = var.region
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  force_destroy               = true
  labels                      = var.labels
  depends_on                  = [google_project_service.apis]
}

# The functions' images, built by the build account (iam.tf) into a repository of this module's
# own instead of the project-wide gcf-artifacts.
resource "google_artifact_registry_repository" "functions" {
  project       = var.project_id
  location      = var.region
  repository_id = "${var.name_prefix}-functions"
  format        = "DOCKER"
  description   = "stalesweep's function images, written by the ${var.name_prefix}-build account only."
  labels        = var.labels
  depends_on    = [google_project_service.apis]
}

resource "google_storage_bucket_object" "source" {
  bucket = google_storage_bucket.source.name
  name   = "${var.name_prefix}-${data.archive_file.source.output_md5}.zip"
  source = data.archive_file.source.output_path
}

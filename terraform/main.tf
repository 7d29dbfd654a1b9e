locals {
  source_dir = coalesce(var.source_dir, abspath("${path.module}/.."))

  # The function targets registered in functions/, each with its trigger topic (null: HTTP).
  # A test holds this map to the targets the code registers.
  functions = {
    dispatch       = { entry_point = "Dispatch", topic = "ticks", budget_env = "STALESWEEP_DISPATCH_BUDGET" }
    sweep          = { entry_point = "Sweep", topic = "sweeps", budget_env = "STALESWEEP_RUN_BUDGET" }
    sync_execution = { entry_point = "SyncExecution", topic = "syncs", budget_env = "STALESWEEP_SYNC_BUDGET" }
    start_workflow = { entry_point = "StartWorkflow", topic = null, budget_env = "STALESWEEP_RUN_BUDGET" }
  }
  event_functions = { for k, f in local.functions : k => f if f.topic != null }

  # The topics the pipeline uses; the code's defaults are these names without the prefix.
  topics = {
    ticks  = "${var.name_prefix}-ticks"
    sweeps = "${var.name_prefix}-sweeps"
    syncs  = "${var.name_prefix}-syncs"
  }

  schedules = {
    for type, s in var.schedules : type => s
    if s.enabled && (var.enable_kubernetes || type != "runner.execution-sync-stale-kubernetes")
  }

  # StartWorkflow's callers: the invokers that are users or service accounts, by email.
  allowed_callers = [
    for p in var.start_workflow_invokers : split(":", p)[1]
    if startswith(p, "user:") || startswith(p, "serviceAccount:")
  ]

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
    STALESWEEP_KUBE_CLUSTERS            = var.enable_kubernetes ? var.kube_clusters : ""
  }
}

data "google_project" "this" {
  project_id = var.project_id
}

resource "google_project_service" "apis" {
  for_each = var.enable_apis ? toset([
    "artifactregistry.googleapis.com", "cloudbuild.googleapis.com", "cloudfunctions.googleapis.com",
    "cloudscheduler.googleapis.com", "eventarc.googleapis.com", "firestore.googleapis.com",
    "iam.googleapis.com", "pubsub.googleapis.com", "run.googleapis.com", "storage.googleapis.com",
  ]) : toset([])
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

resource "google_storage_bucket_object" "source" {
  bucket = google_storage_bucket.source.name
  name   = "${var.name_prefix}-${data.archive_file.source.output_md5}.zip"
  source = data.archive_file.source.output_path
}

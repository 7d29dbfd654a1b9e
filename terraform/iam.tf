# Three identities, each with exactly what it needs:
#   runtime   — the functions: Firestore (datastore.user), Cloud Run Executions (run.viewer),
#               publish to the sweeps and syncs topics, and with Kubernetes, reach the clusters.
#   trigger   — Eventarc's push to the event functions: run.invoker on those services only.
#   scheduler — Cloud Scheduler publishes ticks as its service agent (a Pub/Sub target cannot
#               run as another account): publisher on the ticks topic only.
# Nothing is granted to allUsers or allAuthenticatedUsers.

resource "google_service_account" "runtime" {
  project      = var.project_id
  account_id   = "${var.name_prefix}-runtime"
  display_name = "stalesweep functions"
  depends_on   = [google_project_service.apis]
}

resource "google_service_account" "trigger" {
  project      = var.project_id
  account_id   = "${var.name_prefix}-trigger"
  display_name = "stalesweep event triggers"
  depends_on   = [google_project_service.apis]
}

locals {
  runtime_member   = "serviceAccount:${google_service_account.runtime.email}"
  trigger_member   = "serviceAccount:${google_service_account.trigger.email}"
  scheduler_member = "serviceAccount:service-${data.google_project.this.number}@gcp-sa-cloudscheduler.iam.gserviceaccount.com"
  runtime_project_roles = concat(
    ["roles/datastore.user", "roles/run.viewer"],
    var.enable_kubernetes ? ["roles/container.clusterViewer"] : [],
  )
}

resource "google_project_iam_member" "runtime" {
  for_each = toset(local.runtime_project_roles)
  project  = var.project_id
  role     = each.value
  member   = local.runtime_member
}

resource "google_pubsub_topic_iam_member" "runtime_publishes_sweeps" {
  project = var.project_id
  topic   = google_pubsub_topic.sweeps.id
  role    = "roles/pubsub.publisher"
  member  = local.runtime_member
}

resource "google_pubsub_topic_iam_member" "runtime_publishes_syncs" {
  project = var.project_id
  topic   = google_pubsub_topic.syncs.id
  role    = "roles/pubsub.publisher"
  member  = local.runtime_member
}

resource "google_pubsub_topic_iam_member" "scheduler_publishes_ticks" {
  project = var.project_id
  topic   = google_pubsub_topic.ticks.id
  role    = "roles/pubsub.publisher"
  member  = local.scheduler_member
}

resource "google_cloud_run_service_iam_member" "trigger_invokes" {
  for_each = local.event_functions
  project  = var.project_id
  location = var.region
  service  = google_cloudfunctions2_function.fn[each.key].service_config[0].service
  role     = "roles/run.invoker"
  member   = local.trigger_member
}

resource "google_cloud_run_service_iam_member" "start_workflow_invokers" {
  for_each = toset(var.start_workflow_invokers)
  project  = var.project_id
  location = var.region
  service  = google_cloudfunctions2_function.fn["start_workflow"].service_config[0].service
  role     = "roles/run.invoker"
  member   = each.value
}

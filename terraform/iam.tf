# Four identities of the module's own, and the Google service agents it relies on, each with
# exactly what its calls need (internal/testkit/deploycheck holds every grant to this list, and the
# runtime's custom role to the permissions the code declares):
#   runtime   — the four functions:
#               a custom role with the executor calls the code makes: run.executions.get
#               (cloudrun.IAMPermissions: GetExecution only) and, with Kubernetes,
#               container.clusters.get (kubejobs.IAMPermissions: the GKE endpoint; inside the
#               cluster an RBAC Role grants get on batch/jobs, docs/operations.md);
#               roles/datastore.user on the project, conditioned to the one database;
#               publisher on the sweeps and syncs topics;
#               with kube_clusters_secret, secretAccessor on that one secret.
#   build     — Cloud Build, building the functions: writes the build log (logging.logWriter),
#               reads the source Cloud Functions copies into its gcf-v2-sources bucket
#               (storage.objectViewer, conditioned to that bucket), pushes the image to the
#               module's repository (artifactregistry.writer on it only).
#   trigger   — Eventarc's push to the event functions: run.invoker on those services only.
#   scheduler — Cloud Scheduler publishes ticks as its service agent (a Pub/Sub target cannot
#               run as another account): publisher on the ticks topic only.
#   Pub/Sub's service agent — dead-lettering (pubsub.tf); with pubsub_agent_token_creator, token
#               creator on the trigger account only.
#   start_workflow_invokers — run.invoker on StartWorkflow's service only.
# Nothing is granted to allUsers or allAuthenticatedUsers.

resource "google_service_account" "runtime" {
  project      = var.project_id
  account_id   = "${var.name_prefix}-runtime"
  display_name = "stalesweep functions"
  depends_on   = [google_project_service.apis]
}

resource "google_service_account" "build" {
  project      = var.project_id
  account_id   = "${var.name_prefix}-build"
  display_name = "stalesweep function builds"
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
  build_member     = "serviceAccount:${google_service_account.build.email}"
  trigger_member   = "serviceAccount:${google_service_account.trigger.email}"
  scheduler_member = "serviceAccount:service-${data.google_project.this.number}@gcp-sa-cloudscheduler.iam.gserviceaccount.com"
  # Where Cloud Functions copies each function's source before the build fetches it from there
  # (not from google_storage_bucket.source): created by Cloud Functions, in this project.
  gcf_sources_bucket = "gcf-v2-sources-${data.google_project.this.number}-${var.region}"
}

# --- runtime ---------------------------------------------------------------------------------

# The executor calls, and nothing else: cloudrun.IAMPermissions (+ kubejobs.IAMPermissions).
# This replaces roles/run.viewer and roles/container.clusterViewer.
resource "google_project_iam_custom_role" "runtime" {
  project     = var.project_id
  role_id     = "${replace(var.name_prefix, "-", "_")}_runtime"
  title       = "stalesweep executor reads"
  description = "What stalesweep's functions ask the executors: a Cloud Run execution (GetExecution) and, with Kubernetes, a GKE cluster's endpoint."
  permissions = concat(
    ["run.executions.get"],
    var.enable_kubernetes ? ["container.clusters.get"] : [],
  )
}

resource "google_project_iam_member" "runtime_executors" {
  project = var.project_id
  role    = google_project_iam_custom_role.runtime.id
  member  = local.runtime_member
}

# The ledger, the run records and the guards: reads, writes and transactions on documents of the
# one database, and no other database of the project.
resource "google_project_iam_member" "runtime_firestore" {
  project = var.project_id
  role    = "roles/datastore.user"
  member  = local.runtime_member
  condition {
    title       = "only the ${var.firestore_database} database"
    description = "stalesweep's functions read and write the database they are configured with (STALESWEEP_FIRESTORE_DATABASE), not the project's other databases."
    expression  = "resource.name == \"projects/${var.project_id}/databases/${var.firestore_database}\""
  }
}

resource "google_pubsub_topic_iam_member" "runtime_publishes_sweeps" {
  project = var.project_id
  topic   = google_pubsub_topic.sweeps.id
  role    = "roles/pubsub.publisher"
  member  = local.runtime_member
}

# Dispatch hands the rest of a tick larger than one invocation to the next, on the ticks topic.
resource "google_pubsub_topic_iam_member" "runtime_continues_ticks" {
  project = var.project_id
  topic   = google_pubsub_topic.ticks.id
  role    = "roles/pubsub.publisher"
  member  = local.runtime_member
}

resource "google_pubsub_topic_iam_member" "runtime_publishes_syncs" {
  project = var.project_id
  topic   = google_pubsub_topic.syncs.id
  role    = "roles/pubsub.publisher"
  member  = local.runtime_member
}

# The clusters' configuration, mounted into the functions (functions.tf): that one secret only.
resource "google_secret_manager_secret_iam_member" "runtime_reads_kube_clusters" {
  count     = local.kube_secret ? 1 : 0
  project   = var.project_id
  secret_id = var.kube_clusters_secret
  role      = "roles/secretmanager.secretAccessor"
  member    = local.runtime_member
}

# --- build -----------------------------------------------------------------------------------

# Cloud Build writes the build's log to Cloud Logging as the build's account.
resource "google_project_iam_member" "build_logs" {
  project = var.project_id
  role    = "roles/logging.logWriter"
  member  = local.build_member
}

# The build's fetch step downloads the source from gs://gcf-v2-sources-NUMBER-REGION/NAME/, where
# Cloud Functions copied it from google_storage_bucket.source; that bucket is Cloud Functions'
# and may not exist before the first function of the region, so the grant is on the project,
# conditioned to that bucket and its objects.
resource "google_project_iam_member" "build_reads_sources" {
  project = var.project_id
  role    = "roles/storage.objectViewer"
  member  = local.build_member
  condition {
    title       = "only Cloud Functions' source bucket"
    description = "The build fetches the function source Cloud Functions copied into ${local.gcf_sources_bucket}; no other bucket."
    expression  = "resource.name == \"projects/_/buckets/${local.gcf_sources_bucket}\" || resource.name.startsWith(\"projects/_/buckets/${local.gcf_sources_bucket}/objects/\")"
  }
}

# The built image (and the buildpacks' cache image) goes to the module's repository only.
resource "google_artifact_registry_repository_iam_member" "build_writes_images" {
  project    = var.project_id
  location   = var.region
  repository = google_artifact_registry_repository.functions.name
  role       = "roles/artifactregistry.writer"
  member     = local.build_member
}

# --- scheduler, trigger, invokers ------------------------------------------------------------

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

# Eventarc's authenticated push: in projects whose Pub/Sub service agent was created on or
# before 8 April 2021, that agent must be able to mint the trigger account's tokens. On the
# trigger account only, not project-wide.
resource "google_service_account_iam_member" "pubsub_agent_mints_trigger_tokens" {
  count              = var.pubsub_agent_token_creator ? 1 : 0
  service_account_id = google_service_account.trigger.name
  role               = "roles/iam.serviceAccountTokenCreator"
  member             = local.pubsub_agent
}

resource "google_cloud_run_service_iam_member" "start_workflow_invokers" {
  for_each = toset(var.start_workflow_invokers)
  project  = var.project_id
  location = var.region
  service  = google_cloudfunctions2_function.fn["start_workflow"].service_config[0].service
  role     = "roles/run.invoker"
  member   = each.value
}

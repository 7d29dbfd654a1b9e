# The event path (docs/operations.md, "The event path"): a log sink sends each executor's
# completion entries to the ends topic, which triggers ObserveExecution. The filters are
# generated from the code (log_sinks.tf.json, `go run ./cmd/stalesweep sinks`); one sink holds
# the enabled executors' filters. The sink lives in this project, or in a folder or organization
# when the runners live in several projects (var.log_sink_scope). Its writer identity may publish
# to the ends topic and nothing else.

resource "google_pubsub_topic" "ends" {
  project    = var.project_id
  name       = local.topics.ends
  labels     = var.labels
  depends_on = [google_project_service.apis]
}

locals {
  execution_end_filter = join(" OR ", [
    for k in sort(keys(local.execution_end_filters)) : "(${local.execution_end_filters[k]})"
    if var.enable_kubernetes || k != "kubernetes"
  ])
  ends_destination = "pubsub.googleapis.com/${google_pubsub_topic.ends.id}"
  ends_sink_name   = "${var.name_prefix}-ends"
}

resource "google_logging_project_sink" "ends" {
  count                  = var.log_sink_scope == "project" ? 1 : 0
  project                = var.project_id
  name                   = local.ends_sink_name
  destination            = local.ends_destination
  filter                 = local.execution_end_filter
  unique_writer_identity = true
}

resource "google_logging_folder_sink" "ends" {
  count            = var.log_sink_scope == "folder" ? 1 : 0
  folder           = var.log_sink_parent_id
  name             = local.ends_sink_name
  destination      = local.ends_destination
  filter           = local.execution_end_filter
  include_children = true
  lifecycle {
    precondition {
      condition     = var.log_sink_parent_id != ""
      error_message = "log_sink_scope is folder: set log_sink_parent_id to its id."
    }
  }
}

resource "google_logging_organization_sink" "ends" {
  count            = var.log_sink_scope == "organization" ? 1 : 0
  org_id           = var.log_sink_parent_id
  name             = local.ends_sink_name
  destination      = local.ends_destination
  filter           = local.execution_end_filter
  include_children = true
  lifecycle {
    precondition {
      condition     = var.log_sink_parent_id != ""
      error_message = "log_sink_scope is organization: set log_sink_parent_id to its id."
    }
  }
}

resource "google_pubsub_topic_iam_member" "project_sink_publishes_ends" {
  count   = var.log_sink_scope == "project" ? 1 : 0
  project = var.project_id
  topic   = google_pubsub_topic.ends.id
  role    = "roles/pubsub.publisher"
  member  = google_logging_project_sink.ends[0].writer_identity
}

resource "google_pubsub_topic_iam_member" "folder_sink_publishes_ends" {
  count   = var.log_sink_scope == "folder" ? 1 : 0
  project = var.project_id
  topic   = google_pubsub_topic.ends.id
  role    = "roles/pubsub.publisher"
  member  = google_logging_folder_sink.ends[0].writer_identity
}

resource "google_pubsub_topic_iam_member" "organization_sink_publishes_ends" {
  count   = var.log_sink_scope == "organization" ? 1 : 0
  project = var.project_id
  topic   = google_pubsub_topic.ends.id
  role    = "roles/pubsub.publisher"
  member  = google_logging_organization_sink.ends[0].writer_identity
}

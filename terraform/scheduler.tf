# One job per enabled workflow type. Each publishes a tick — {"workflow_type", "initial_data"},
# attribute trigger=schedule — that Dispatch fans out to every scope.
resource "google_cloud_scheduler_job" "tick" {
  for_each  = local.schedules
  project   = var.project_id
  region    = var.region
  name      = "${var.name_prefix}-${replace(each.key, ".", "-")}"
  schedule  = each.value.schedule
  time_zone = var.schedule_time_zone

  pubsub_target {
    topic_name = google_pubsub_topic.ticks.id
    data       = base64encode(jsonencode({ workflow_type = each.key, initial_data = each.value.initial_data }))
    attributes = { trigger = "schedule", actor = "cloud-scheduler" }
  }

  retry_config {
    retry_count          = 3
    min_backoff_duration = "5s"
    max_backoff_duration = "60s"
  }

  depends_on = [google_pubsub_topic_iam_member.scheduler_publishes_ticks]
}

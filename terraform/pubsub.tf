resource "google_pubsub_topic" "ticks" {
  project    = var.project_id
  name       = local.topics.ticks
  labels     = var.labels
  depends_on = [google_project_service.apis]
}

resource "google_pubsub_topic" "sweeps" {
  project    = var.project_id
  name       = local.topics.sweeps
  labels     = var.labels
  depends_on = [google_project_service.apis]
}

resource "google_pubsub_topic" "syncs" {
  project    = var.project_id
  name       = local.topics.syncs
  labels     = var.labels
  depends_on = [google_project_service.apis]
}

# Messages no function could take after max_delivery_attempts land here, to be inspected:
#   gcloud pubsub subscriptions pull stalesweep-dead-letter-inspect --limit=10
resource "google_pubsub_topic" "dead_letter" {
  project    = var.project_id
  name       = "${var.name_prefix}-dead-letter"
  labels     = var.labels
  depends_on = [google_project_service.apis]
}

resource "google_pubsub_subscription" "dead_letter_inspect" {
  project                    = var.project_id
  name                       = "${var.name_prefix}-dead-letter-inspect"
  topic                      = google_pubsub_topic.dead_letter.id
  message_retention_duration = "604800s"
  retain_acked_messages      = true
  ack_deadline_seconds       = 60
  expiration_policy {
    ttl = ""
  }
  labels = var.labels
}

locals {
  topic_ids = {
    ticks  = google_pubsub_topic.ticks.id
    sweeps = google_pubsub_topic.sweeps.id
    syncs  = google_pubsub_topic.syncs.id
    ends   = google_pubsub_topic.ends.id
  }
  pubsub_agent = "serviceAccount:service-${data.google_project.this.number}@gcp-sa-pubsub.iam.gserviceaccount.com"
}

# Dead-lettering is done by the Pub/Sub service agent: it publishes to the dead-letter topic and
# must be able to acknowledge on the source subscriptions (granted per subscription below).
resource "google_pubsub_topic_iam_member" "dead_letter_publisher" {
  count   = var.enable_dead_letter ? 1 : 0
  project = var.project_id
  topic   = google_pubsub_topic.dead_letter.id
  role    = "roles/pubsub.publisher"
  member  = local.pubsub_agent
}

# Eventarc creates and owns each event function's push subscription, and Terraform cannot set a
# dead-letter policy on it; this attaches one with gcloud once the trigger exists.
resource "terraform_data" "dead_letter_policy" {
  for_each         = var.enable_dead_letter ? local.event_functions : {}
  triggers_replace = [google_cloudfunctions2_function.fn[each.key].event_trigger[0].trigger, google_pubsub_topic.dead_letter.id]
  provisioner "local-exec" {
    command = <<-EOT
      set -e
      sub=$(gcloud eventarc triggers describe "${google_cloudfunctions2_function.fn[each.key].event_trigger[0].trigger}" \
        --project="${var.project_id}" --location="${var.region}" --format='value(transport.pubsub.subscription)')
      gcloud pubsub subscriptions update "$sub" --project="${var.project_id}" \
        --dead-letter-topic="${google_pubsub_topic.dead_letter.id}" --max-delivery-attempts="${var.max_delivery_attempts}"
      gcloud pubsub subscriptions add-iam-policy-binding "$sub" --project="${var.project_id}" \
        --member="${local.pubsub_agent}" --role=roles/pubsub.subscriber
    EOT
  }
}

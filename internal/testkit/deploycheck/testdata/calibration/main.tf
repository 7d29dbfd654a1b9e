# Known-good configurations, written for this test after the shapes of the provider's own
# documentation examples (Cloud Functions' "functions-v2-basic" sample; the pubsub_topic,
# pubsub_subscription, cloud_scheduler_job, project_iam_member and service_account examples).
# The stand-in must accept all of it; the test's broken copies must not be accepted.
terraform {
  required_providers {
    google  = { source = "hashicorp/google" }
    archive = { source = "hashicorp/archive" }
  }
}

resource "google_storage_bucket" "default" {
  name                        = "calibration-gcf-source"
  location                    = "US"
  uniform_bucket_level_access = true
}

data "archive_file" "default" {
  type        = "zip"
  output_path = "/tmp/function-source.zip"
  source_dir  = "functions/hello-world/"
}

resource "google_storage_bucket_object" "object" {
  name   = "function-source.zip"
  bucket = google_storage_bucket.default.name
  source = data.archive_file.default.output_path
}

resource "google_cloudfunctions2_function" "default" {
  name        = "function-v2"
  location    = "us-central1"
  description = "a new function"

  build_config {
    runtime     = "go126"
    entry_point = "HelloHTTP"
    source {
      storage_source {
        bucket = google_storage_bucket.default.name
        object = google_storage_bucket_object.object.name
      }
    }
  }

  service_config {
    max_instance_count = 1
    available_memory   = "256M"
    timeout_seconds    = 60
  }
}

resource "google_pubsub_topic" "example" {
  name   = "example-topic"
  labels = { foo = "bar" }
}

resource "google_pubsub_subscription" "example" {
  name                 = "example-subscription"
  topic                = google_pubsub_topic.example.id
  ack_deadline_seconds = 20
  push_config {
    push_endpoint = "https://example.com/push"
    attributes    = { x-goog-version = "v1" }
  }
}

resource "google_cloud_scheduler_job" "job" {
  name        = "test-job"
  description = "test job"
  schedule    = "*/2 * * * *"
  pubsub_target {
    topic_name = google_pubsub_topic.example.id
    data       = base64encode("test")
  }
}

resource "google_service_account" "sa" {
  account_id   = "my-service-account"
  display_name = "A service account"
}

resource "google_project_iam_member" "project" {
  project = "your-project-id"
  role    = "roles/editor"
  member  = "user:jane@example.com"
  condition {
    title       = "expires_after_2029_12_31"
    description = "Expiring at midnight of 2029-12-31"
    expression  = "request.time < timestamp(\"2030-01-01T00:00:00Z\")"
  }
}

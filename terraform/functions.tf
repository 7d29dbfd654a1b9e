resource "google_cloudfunctions2_function" "fn" {
  for_each = local.functions
  project  = var.project_id
  location = var.region
  name     = "${var.name_prefix}-${replace(each.key, "_", "-")}"
  labels   = var.labels

  build_config {
    runtime     = "go126"
    entry_point = each.value.entry_point
    source {
      storage_source {
        bucket = google_storage_bucket.source.name
        object = google_storage_bucket_object.source.name
      }
    }
    # Without Kubernetes, build without client-go (docs/performance.md).
    environment_variables = var.enable_kubernetes ? {} : { GOFLAGS = "-tags=nokubernetes" }
  }

  service_config {
    timeout_seconds                  = var.function_settings[each.key].timeout_seconds
    max_instance_count               = var.function_settings[each.key].max_instances
    max_instance_request_concurrency = var.function_settings[each.key].concurrency
    available_cpu                    = var.function_settings[each.key].concurrency > 1 ? "1" : null
    available_memory                 = var.function_settings[each.key].memory
    service_account_email            = google_service_account.runtime.email
    ingress_settings                 = each.value.topic == null ? "ALLOW_ALL" : "ALLOW_INTERNAL_ONLY"
    all_traffic_on_latest_revision   = true
    environment_variables = merge(local.common_env, {
      # Each function keeps its work to 80% of its own timeout.
      (each.value.budget_env) = "${floor(var.function_settings[each.key].timeout_seconds * 0.8)}s"
      }, each.value.topic == null ? {
      # StartWorkflow: Google ID tokens for the URL it was called on, from these callers only.
      STALESWEEP_AUTH_AUDIENCE   = "request"
      STALESWEEP_ALLOWED_CALLERS = join(",", local.allowed_callers)
    } : {})
  }

  dynamic "event_trigger" {
    for_each = each.value.topic == null ? [] : [each.value.topic]
    content {
      trigger_region        = var.region
      event_type            = "google.cloud.pubsub.topic.v1.messagePublished"
      pubsub_topic          = local.topic_ids[event_trigger.value]
      retry_policy          = var.retry_policy
      service_account_email = google_service_account.trigger.email
    }
  }

  depends_on = [google_project_iam_member.runtime, google_project_service.apis]
}

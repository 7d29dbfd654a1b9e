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
    # The build runs as the module's build account, into the module's repository (iam.tf).
    service_account   = google_service_account.build.id
    docker_repository = google_artifact_registry_repository.functions.id
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
      # StartWorkflow: Google ID tokens for its own URLs (or gcloud's, when accepted), from these
      # callers only. All three come from this module, never from the request.
      STALESWEEP_AUTH_AUDIENCE      = join(",", local.start_workflow_audiences)
      STALESWEEP_AUTH_ACCEPT_GCLOUD = tostring(var.accept_gcloud_tokens)
      STALESWEEP_ALLOWED_CALLERS    = join(",", local.allowed_callers)
    } : {})

    # The clusters' secret, when there is one, as a file (local.kube_clusters names it). Read on
    # each access, so a new version needs no redeploy.
    dynamic "secret_volumes" {
      for_each = local.kube_secret ? [var.kube_clusters_secret] : []
      content {
        mount_path = local.kube_secret_mount_path
        project_id = var.project_id
        secret     = secret_volumes.value
        versions {
          version = "latest"
          path    = local.kube_secret_file
        }
      }
    }
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

  lifecycle {
    # Terraform 1.5 lets a variable's validation see only that variable, so the two ways of
    # giving the clusters are held apart here.
    precondition {
      condition     = var.kube_clusters == "" || var.kube_clusters_secret == ""
      error_message = "Set kube_clusters (inline JSON) or kube_clusters_secret (a Secret Manager secret), not both."
    }
  }

  # The build's grants before the build, the runtime's before the first instance (a deployment
  # also checks that the runtime account may read a mounted secret).
  depends_on = [
    google_project_service.apis,
    google_project_iam_member.runtime_firestore,
    google_project_iam_member.runtime_executors,
    google_secret_manager_secret_iam_member.runtime_reads_kube_clusters,
    google_project_iam_member.build_logs,
    google_project_iam_member.build_reads_sources,
    google_artifact_registry_repository_iam_member.build_writes_images,
  ]
}

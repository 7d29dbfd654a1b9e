output "function_uris" {
  description = "Each function's URL, by target."
  value       = { for k, f in google_cloudfunctions2_function.fn : local.functions[k].entry_point => f.service_config[0].uri }
}

output "topics" {
  description = "The pipeline's topics, and the dead-letter topic and its inspection subscription."
  value = {
    ticks               = google_pubsub_topic.ticks.name
    sweeps              = google_pubsub_topic.sweeps.name
    syncs               = google_pubsub_topic.syncs.name
    dead_letter         = google_pubsub_topic.dead_letter.name
    dead_letter_inspect = google_pubsub_subscription.dead_letter_inspect.name
  }
}

output "service_accounts" {
  description = "The runtime, build and trigger accounts, and the Cloud Scheduler service agent that publishes ticks."
  value = {
    runtime   = google_service_account.runtime.email
    build     = google_service_account.build.email
    trigger   = google_service_account.trigger.email
    scheduler = trimprefix(local.scheduler_member, "serviceAccount:")
  }
}

output "scheduler_jobs" {
  description = "The scheduler job of each workflow type."
  value       = { for type, j in google_cloud_scheduler_job.tick : type => j.name }
}

output "start_workflow_url" {
  description = "StartWorkflow's deterministic run.app URL: mint ID tokens for it (or for the cloudfunctions.net URL), e.g. gcloud auth print-identity-token --impersonate-service-account=SA --audiences=URL --include-email."
  value       = local.start_workflow_audiences[1]
}

output "start_workflow_audiences" {
  description = "The audiences StartWorkflow accepts (STALESWEEP_AUTH_AUDIENCE): its cloudfunctions.net and run.app URLs; gcloud's own client id too when accept_gcloud_tokens."
  value       = local.start_workflow_audiences
}

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
  description = "The runtime and trigger accounts, and the Cloud Scheduler service agent that publishes ticks."
  value = {
    runtime   = google_service_account.runtime.email
    trigger   = google_service_account.trigger.email
    scheduler = trimprefix(local.scheduler_member, "serviceAccount:")
  }
}

output "scheduler_jobs" {
  description = "The scheduler job of each workflow type."
  value       = { for type, j in google_cloud_scheduler_job.tick : type => j.name }
}

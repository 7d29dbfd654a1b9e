package pipeline

// Route is one topic delivered to one function target.
type Route struct {
	Topic, Subscription, Target string
}

// Routes returns which function target each topic is delivered to; the Terraform checks hold the module to it.
func Routes(topics Topics) []Route {
	topics = topics.WithDefaults()
	return []Route{
		{Topic: topics.Ticks, Subscription: topics.Ticks + "-dispatch", Target: "Dispatch"},
		{Topic: topics.Sweeps, Subscription: topics.Sweeps + "-sweep", Target: "Sweep"},
		{Topic: topics.Syncs, Subscription: topics.Syncs + "-sync-execution", Target: "SyncExecution"},
		{Topic: topics.Ends, Subscription: topics.Ends + "-observe-execution", Target: "ObserveExecution"},
	}
}

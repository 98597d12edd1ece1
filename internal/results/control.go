package results

// Metrics of discovery, in seconds from the start of the trial's exposing
// (the new server and the datapath's exposure start together): until the
// first transaction from the client's site succeeded (DiscoverySeconds,
// the headline), and the checkpoints on the way: the server listening,
// the datapath's exposure installed (its call returned), the probe's
// first connection made, its first response read.
const (
	DiscoverySeconds      = "discovery_s"
	ProcessReadySeconds   = "process_ready_s"
	RouteInstalledSeconds = "route_installed_s"
	FirstConnectSeconds   = "first_connect_s"
	FirstResponseSeconds  = "first_response_s"
)

// Metrics of failover: the gap in successful transactions, from the last
// answer of the failed site's server to the first from the other site
// (OutageSeconds, the headline); from the failure's injection to that
// first answer (RecoverySeconds); and how many transactions failed
// (FailedTransactions, counted from the first that succeeded).
// AnsweredBy{SITE} counts the transactions each site's server answered.
const (
	OutageSeconds      = "outage_s"
	RecoverySeconds    = "recovery_s"
	FailedTransactions = "failed_transactions"
	AnsweredBy         = "answered_by"
	// FailedAfterSeconds is when the failure was injected, from the first
	// answer (the workload's fail_after, plus the controller's lateness).
	FailedAfterSeconds = "failed_after_s"
)

// Checkpoints of discovery and failover on Kubernetes, in seconds from
// the trial's start (discovery: creating the server; failover: the
// failure): the new server's pod seen Ready (PodReadySeconds), its
// Service's EndpointSlice seen with its address ready
// (EndpointsReadySeconds); the failed server's endpoint seen gone from its
// EndpointSlice (EndpointGoneSeconds) and the client cluster's
// EndpointSlice moved to the survivor (SwitchedSeconds).
const (
	PodReadySeconds       = "pod_ready_s"
	EndpointsReadySeconds = "endpoints_ready_s"
	EndpointGoneSeconds   = "endpoint_gone_s"
	SwitchedSeconds       = "switched_s"
)

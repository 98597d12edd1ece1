package results

// Metrics of the connections workload (memory per open connection). The
// per-trial figures are in records; the slope across a sweep's levels
// (RSSBytesPerConnection) is derived by the summary and the report from
// several records, never stored in one.
const (
	// OpenConnections is the number of TCP connections the client opened
	// through the datapath and held: each connected and answered its first
	// keepalive, so the whole chain (relays included) was established.
	OpenConnections = "open_connections"
	// ConnectRatePerS is the rate the connections opened at: open
	// connections over the time from the first connect to the last first
	// answer.
	ConnectRatePerS = "connect_rate_per_s"
	// ConnectFailures counts connections that failed to connect or to
	// answer their first keepalive.
	ConnectFailures = "connect_failures"
	// ConnectLatencyP50 and ConnectLatencyP99 are percentiles, in seconds,
	// of the time from a connection's connect to its first answer (a
	// relay's handshakes included).
	ConnectLatencyP50 = "connect_latency_p50_s"
	ConnectLatencyP99 = "connect_latency_p99_s"
	// Keepalives counts the keepalive exchanges answered while the
	// connections were held, and KeepaliveFailures the connections that
	// failed one (they were dropped).
	Keepalives        = "keepalives"
	KeepaliveFailures = "keepalive_failures"
	// EphemeralPorts is how many ports the client's site's ephemeral port
	// range (net.ipv4.ip_local_port_range) spanned once the client had
	// widened it for its connections.
	EphemeralPorts = "ephemeral_ports"
	// RSSBytesIdle is a component's resident memory (its process tree's)
	// before the client connected, with the datapath freshly set up (per
	// component, named with For).
	RSSBytesIdle = "rss_bytes_idle"
	// RSSBytes is a component's resident memory while the trial's
	// connections were held: the median of samples over the measured
	// window (per component).
	RSSBytes = "rss_bytes"
	// RSSBytesAddedPerConnection is one trial's two-point figure per
	// component: (RSSBytes − RSSBytesIdle) / OpenConnections.
	RSSBytesAddedPerConnection = "rss_bytes_added_per_connection"
	// RSSBytesDatapath, RSSBytesIdleDatapath and
	// RSSBytesAddedPerConnectionDatapath are the same over every process
	// of the datapath together.
	RSSBytesDatapath                   = "rss_bytes_datapath"
	RSSBytesIdleDatapath               = "rss_bytes_idle_datapath"
	RSSBytesAddedPerConnectionDatapath = "rss_bytes_added_per_connection_datapath"
	// RSSBytesPerConnection is the least-squares slope of a component's
	// RSSBytes against OpenConnections over the trials of a sweep's levels
	// (several records; see report.ConnectionFits), with its intercept and
	// r². It is never stored in a record.
	RSSBytesPerConnection = "rss_bytes_per_connection"
)

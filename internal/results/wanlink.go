package results

// WANMTUParam is the parameter of a sweep of the underlay MTU (wan.mtu
// given as a list): an int64, every link's MTU at that point.
const WANMTUParam = "wan.mtu"

// Keys of a swept per-pair WAN link's parameters (see WANLinkParam).
const (
	WANLinkDelay       = "delay"
	WANLinkJitter      = "jitter"
	WANLinkLossPercent = "loss_percent"
	WANLinkRateBPS     = "rate_bps"
)

// WANLinkParam names the parameter of a sweep of one value of the link
// between sites a and b, as the scenario writes the pair: key is
// WANLinkDelay or WANLinkJitter (a duration string), WANLinkLossPercent (a
// percentage) or WANLinkRateBPS (bits/s). For example "wan.link.a-c.delay".
func WANLinkParam(a, b, key string) string {
	return "wan.link." + a + "-" + b + "." + key
}

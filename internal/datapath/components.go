package datapath

import (
	"strings"

	"github.com/spanperf/spanperf/internal/scenario"
	"github.com/spanperf/spanperf/internal/testbed/netns"
)

// kernelPart is the kernel's share, in role.
func kernelPart(role string) scenario.Component {
	return scenario.Component{Name: KernelComponent().Name, Role: role}
}

// perSite declares a process name running in each of sites sites, named
// as Daemon.Component names it: NAME@SITE.
func perSite(name, role string, sites int) []scenario.Component {
	out := make([]scenario.Component, 0, sites)
	for i := range sites {
		out = append(out, scenario.Component{Name: name + "@" + netns.SiteName(i), Role: role, Process: true})
	}
	return out
}

func wireguardComponents(o map[string]any, sites int) []scenario.Component {
	impl, _ := o["implementation"].(string)
	var out []scenario.Component
	if impl != WireGuardKernel {
		out = append(out, perSite("wireguard-go", "tunnel", sites)...)
	}
	if impl != WireGuardUserspace {
		out = append(out, kernelPart("tunnel"))
	}
	return out
}

func ipsecComponents(o map[string]any, sites int) []scenario.Component {
	if impl, _ := o["implementation"].(string); impl == IPsecLibreswan {
		return append(perSite("pluto", "tunnel", sites), kernelPart("kernel"))
	}
	out := perSite("charon", "tunnel", sites)
	if esp, _ := o["esp"].(string); esp != "libipsec" {
		out = append(out, kernelPart("kernel"))
	}
	return out
}

func mtlsRelayComponents(_ map[string]any, sites int) []scenario.Component {
	return perSite("haproxy", "relay", sites)
}

func meshGatewayComponents(_ map[string]any, sites int) []scenario.Component {
	return append(perSite("haproxy-proxy", "proxy", sites), perSite("haproxy-gateway", "gateway", sites)...)
}

func ovsComponents(_ map[string]any, sites int) []scenario.Component {
	out := append(perSite("ovsdb-server", "control", sites), perSite("ovs-vswitchd", "switch", sites)...)
	return append(out, kernelPart("kernel"))
}

// customComponents declares the processes the components option names; with
// none named, up's own process (a name only setup can tell) or else the
// kernel.
func customComponents(o map[string]any, sites int) []scenario.Component {
	role, _ := o["role"].(string)
	if role == "" {
		role = "relay"
	}
	names, _ := o["components"].(string)
	var out []scenario.Component
	for _, name := range strings.Split(names, ",") {
		if name = strings.TrimSpace(name); name != "" {
			out = append(out, perSite(name, role, sites)...)
		}
	}
	if len(out) == 0 {
		out = []scenario.Component{{Role: role, Process: true}, kernelPart("kernel")}
	}
	return out
}

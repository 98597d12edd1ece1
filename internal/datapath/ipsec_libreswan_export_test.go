package datapath

import (
	"net/netip"
)

// LibreswanSiteForTest is one site as LibreswanFilesForTest takes it.
type LibreswanSiteForTest struct {
	Name   string
	Addr   netip.Addr
	Behind []netip.Prefix
}

// LibreswanFilesForTest returns the ipsec.conf and ipsec.secrets the
// libreswan path writes for site me of sites (site i's inner address is
// ipsecInner(i), as in Setup), its directory dir.
func LibreswanFilesForTest(dir, proposal, auth string, me int, sites []LibreswanSiteForTest, psk []byte) (conf, secrets string) {
	ends := make([]libreswanEnd, len(sites))
	for i, s := range sites {
		ends[i] = libreswanEnd{name: s.Name, addr: s.Addr, inner: ipsecInner(i), subnets: append([]netip.Prefix{netip.PrefixFrom(ipsecInner(i), 32)}, s.Behind...)}
	}
	f := libreswanFiles{dir: dir, proposal: proposal, auth: auth, me: me, ends: ends, psk: psk}
	return f.ipsecConf(), f.secrets()
}

// KernelESPForTest is the kernel's answer to adding an ESP xfrm state in a
// scratch namespace: nil where the kernel has ESP.
func KernelESPForTest() error {
	refused, err := kernelESP()
	if err != nil {
		return err
	}
	return refused
}

package datapath

import (
	"context"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
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

// LibreswanNSSForTest issues the run's CA and a certificate for each of
// sites under root, as Setup does with auth cert, then makes site me's
// directory root/<me> and its NSS database in root/<me>/nss, as Setup
// does (cert: with the CA and me's certificate and key).
func LibreswanNSSForTest(ctx context.Context, root string, sites []string, me string, cert bool) error {
	t := &libreswanTools{}
	for _, p := range []struct {
		dst  *string
		name string
	}{{&t.certutil, "certutil"}, {&t.pk12util, "pk12util"}, {&t.openssl, "openssl"}} {
		path, err := exec.LookPath(p.name)
		if err != nil {
			return err
		}
		*p.dst = path
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return err
	}
	l := &ipsecLink{p: &IPsec{}, root: root}
	if err := l.issueNames(sites); err != nil {
		return err
	}
	f := libreswanFiles{dir: filepath.Join(root, me)}
	if err := os.MkdirAll(f.dir, 0o700); err != nil {
		return err
	}
	return libreswanNSS(ctx, t, f, me, cert, l.creds[me])
}

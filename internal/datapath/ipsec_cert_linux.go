package datapath

import (
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spanperf/spanperf/internal/pki"
	"github.com/spanperf/spanperf/internal/testbed/netns"
)

// ipsecCertName is the identity of site's certificate (auth: cert): its
// common name and DNS SAN, which the peers name as the remote id.
func ipsecCertName(site *netns.Site) string { return "ipsec-" + site.Name() }

// issueCerts makes a CA for the run (in the datapath's directory, removed
// with it) and a certificate per site, and puts each site's certificate,
// key and the CA where swanctl --load-all reads them: x509/, private/ and
// x509ca/ under the site's swanctl directory. The site named wrongPSK gets
// its certificate from a CA of its own, which no peer trusts.
func (l *ipsecLink) issueCerts() error {
	ca, err := pki.New(filepath.Join(l.root, "ca"), "spanperf ipsec CA")
	if err != nil {
		return fmt.Errorf("ipsec: %w", err)
	}
	for _, s := range l.sites {
		issuer := ca
		if s.site.Name() == l.p.wrongPSK {
			if issuer, err = pki.New(filepath.Join(l.root, "other-ca"), "spanperf ipsec other CA"); err != nil {
				return fmt.Errorf("ipsec: %w", err)
			}
		}
		name := ipsecCertName(s.site)
		crt, err := issuer.Issue(name, name)
		if err != nil {
			return fmt.Errorf("ipsec: site %s: %w", s.site.Name(), err)
		}
		b, err := os.ReadFile(crt.File)
		if err != nil {
			return fmt.Errorf("ipsec: site %s: %w", s.site.Name(), err)
		}
		cert, rest := pem.Decode(b)
		key, _ := pem.Decode(rest)
		caPEM, err := os.ReadFile(ca.CAFile())
		if err != nil {
			return fmt.Errorf("ipsec: %w", err)
		}
		for _, f := range []struct {
			dir  string
			data []byte
		}{
			{"x509", pem.EncodeToMemory(cert)},
			{"private", pem.EncodeToMemory(key)},
			{"x509ca", caPEM},
		} {
			dir := filepath.Join(s.dir, f.dir)
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return fmt.Errorf("ipsec: site %s: %w", s.site.Name(), err)
			}
			file := name + ".pem"
			if f.dir == "x509ca" {
				file = "ca.pem"
			}
			if err := pki.WriteSecret(filepath.Join(dir, file), f.data); err != nil {
				return fmt.Errorf("ipsec: site %s: %w", s.site.Name(), err)
			}
		}
	}
	return nil
}

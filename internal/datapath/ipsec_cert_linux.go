package datapath

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spanperf/spanperf/internal/pki"
	"github.com/spanperf/spanperf/internal/testbed/netns"
)

// ipsecCred is a site's certificate authentication files (auth: cert).
type ipsecCred struct {
	cert, key, ca string // its certificate, its private key (PKCS#8, in SWANCTL_DIR/private), the CA it trusts
}

// issue makes the run's CA under l.root and a certificate per site, its
// name the site's; the test hook's wrongPSK site gets one from a CA of its
// own, which no other site trusts.
func (l *ipsecLink) issue(sites []*netns.Site) error {
	ca, err := pki.New(filepath.Join(l.root, "pki"), "spanperf ipsec ca")
	if err != nil {
		return fmt.Errorf("ipsec: %w", err)
	}
	l.creds = map[string]ipsecCred{}
	for _, s := range sites {
		from := ca
		if s.Name() == l.p.wrongPSK {
			if from, err = pki.New(filepath.Join(l.root, "pki-"+s.Name()), "spanperf ipsec other ca"); err != nil {
				return fmt.Errorf("ipsec: %w", err)
			}
		}
		c, err := from.Issue(s.Name())
		if err != nil {
			return fmt.Errorf("ipsec: site %s: %w", s.Name(), err)
		}
		keyDER, err := x509.MarshalPKCS8PrivateKey(c.TLS.PrivateKey)
		if err != nil {
			return fmt.Errorf("ipsec: site %s: key: %w", s.Name(), err)
		}
		// swanctl loads private keys only from its directory's private/
		// (SWANCTL_DIR is the site's directory); certificates from anywhere.
		priv := filepath.Join(l.root, s.Name(), "private")
		if err := os.MkdirAll(priv, 0o700); err != nil {
			return fmt.Errorf("ipsec: site %s: %w", s.Name(), err)
		}
		cr := ipsecCred{
			cert: filepath.Join(from.Dir(), s.Name()+".crt"),
			key:  filepath.Join(priv, s.Name()+".key"),
			ca:   from.CAFile(),
		}
		if err := pki.WriteSecret(cr.cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.TLS.Certificate[0]})); err != nil {
			return fmt.Errorf("ipsec: site %s: %w", s.Name(), err)
		}
		if err := pki.WriteSecret(cr.key, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})); err != nil {
			return fmt.Errorf("ipsec: site %s: %w", s.Name(), err)
		}
		l.creds[s.Name()] = cr
	}
	return nil
}

// certAuth writes a connection's local and remote rounds for certificate
// authentication: me proves its name with its certificate, and peer must
// show a certificate for its name from the CA me trusts.
func (l *ipsecLink) certAuth(b *strings.Builder, me, peer *netns.Site) {
	c := l.creds[me.Name()]
	fmt.Fprintf(b, "\t\tlocal {\n\t\t\tauth = pubkey\n\t\t\tcerts = %s\n\t\t\tid = %s\n\t\t}\n", c.cert, me.Name())
	fmt.Fprintf(b, "\t\tremote {\n\t\t\tauth = pubkey\n\t\t\tcacerts = %s\n\t\t\tid = %s\n\t\t}\n", c.ca, peer.Name())
}

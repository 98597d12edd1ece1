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
	names := make([]string, len(sites))
	for i, s := range sites {
		names[i] = s.Name()
	}
	return l.issueNames(names)
}

// issueNames is issue for the sites named names.
func (l *ipsecLink) issueNames(names []string) error {
	ca, err := pki.New(filepath.Join(l.root, "pki"), "spanperf ipsec ca")
	if err != nil {
		return fmt.Errorf("ipsec: %w", err)
	}
	l.creds = map[string]ipsecCred{}
	for _, name := range names {
		from := ca
		if name == l.p.wrongPSK {
			if from, err = pki.New(filepath.Join(l.root, "pki-"+name), "spanperf ipsec other ca"); err != nil {
				return fmt.Errorf("ipsec: %w", err)
			}
		}
		c, err := from.Issue(name)
		if err != nil {
			return fmt.Errorf("ipsec: site %s: %w", name, err)
		}
		keyDER, err := x509.MarshalPKCS8PrivateKey(c.TLS.PrivateKey)
		if err != nil {
			return fmt.Errorf("ipsec: site %s: key: %w", name, err)
		}
		// swanctl loads private keys only from its directory's private/
		// (SWANCTL_DIR is the site's directory); certificates from anywhere.
		priv := filepath.Join(l.root, name, "private")
		if err := os.MkdirAll(priv, 0o700); err != nil {
			return fmt.Errorf("ipsec: site %s: %w", name, err)
		}
		cr := ipsecCred{
			cert: filepath.Join(from.Dir(), name+".crt"),
			key:  filepath.Join(priv, name+".key"),
			ca:   from.CAFile(),
		}
		if err := pki.WriteSecret(cr.cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.TLS.Certificate[0]})); err != nil {
			return fmt.Errorf("ipsec: site %s: %w", name, err)
		}
		if err := pki.WriteSecret(cr.key, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})); err != nil {
			return fmt.Errorf("ipsec: site %s: %w", name, err)
		}
		l.creds[name] = cr
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

package pki_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/spanperf/spanperf/internal/pki"
)

func TestPKI(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	p, err := pki.New(dir, "test CA")
	if err != nil {
		t.Fatal(err)
	}
	c, err := p.Issue("relay-a", "relay-a.example")
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("pki dir: %v, mode %v, want 0700", err, fi.Mode().Perm())
	}
	for _, f := range []string{p.CAFile(), c.File} {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", f, fi.Mode().Perm())
		}
	}

	// The file is what haproxy reads: certificate and key in one PEM.
	kp, err := tls.LoadX509KeyPair(c.File, c.File)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(kp.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if k, ok := leaf.PublicKey.(*ecdsa.PublicKey); !ok || k.Curve != elliptic.P256() {
		t.Errorf("key %T, want ECDSA P-256", leaf.PublicKey)
	}
	if leaf.Subject.CommonName != "relay-a" || len(leaf.DNSNames) != 2 || leaf.DNSNames[1] != "relay-a.example" {
		t.Errorf("subject %q, DNS SANs %v", leaf.Subject.CommonName, leaf.DNSNames)
	}
	if len(leaf.URIs) != 1 || leaf.URIs[0].String() != "spiffe://"+pki.TrustDomain+"/relay-a" {
		t.Errorf("URI SANs %v", leaf.URIs)
	}
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: p.Pool(), DNSName: "relay-a", KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
			t.Errorf("verify for usage %v: %v", usage, err)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: p.Pool(), DNSName: "relay-b"}); err == nil {
		t.Error("certificate verified for a name it does not carry")
	}

	// Another CA does not vouch for it.
	other, err := pki.New(filepath.Join(t.TempDir(), "other"), "other CA")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	var ua x509.UnknownAuthorityError
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: other.Pool()}); !errors.As(err, &ua) {
		t.Errorf("verify against another CA: %v, want unknown authority", err)
	}

	if _, err := p.Issue("../escape"); err == nil {
		t.Error("issued a certificate with a path in its name")
	}
	if _, err := pki.New(dir, "again"); err == nil {
		t.Error("New reused an existing directory")
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("pki dir after Close: %v", err)
	}
}

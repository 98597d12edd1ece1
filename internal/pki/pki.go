// Package pki makes throwaway certificate authorities and certificates for
// one run: the TLS datapaths' mutual TLS and the HTTPS servers of the
// workloads.
package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"time"
)

// CA is a certificate authority made for one run of one datapath or server, and the
// certificates it has issued. Keys are ECDSA P-256. The CA's private key
// never leaves memory; the CA certificate and each issued certificate with
// its key are written, mode 0600, into a directory that Close removes.
type CA struct {
	dir   string
	ca    *x509.Certificate
	caKey *ecdsa.PrivateKey
	pool  *x509.CertPool
}

// Cert is a certificate issued by a CA.
type Cert struct {
	// Name is the identity: the certificate's common name and DNS SAN.
	Name string
	// File holds the certificate then its private key, PEM encoded (the
	// form haproxy's `crt` takes; tls.LoadX509KeyPair(File, File) reads it).
	File string
	// TLS is the certificate and key, ready for a crypto/tls Config.
	TLS tls.Certificate
}

// TrustDomain is the SPIFFE trust domain of issued certificates' URI SANs.
const TrustDomain = "spanperf.local"

var pkiName = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]*$`)

// New creates dir (mode 0700; it must not exist) and a fresh CA named cn
// in it; the CA certificate is written to CAFile(). On error nothing is left.
func New(dir, cn string) (_ *CA, err error) {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	p := &CA{dir: dir}
	defer func() {
		if err != nil {
			p.Close()
		}
	}()
	if p.caKey, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		return nil, fmt.Errorf("pki: ca key: %w", err)
	}
	serial, err := pkiSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: cn, Organization: []string{"spanperf"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &p.caKey.PublicKey, p.caKey)
	if err != nil {
		return nil, fmt.Errorf("pki: ca certificate: %w", err)
	}
	if p.ca, err = x509.ParseCertificate(der); err != nil {
		return nil, fmt.Errorf("pki: ca certificate: %w", err)
	}
	p.pool = x509.NewCertPool()
	p.pool.AddCert(p.ca)
	if err := WriteSecret(p.CAFile(), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})); err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	return p, nil
}

// Dir is the directory holding the CA's files.
func (p *CA) Dir() string { return p.dir }

// CAFile is the path of the CA certificate (PEM).
func (p *CA) CAFile() string { return filepath.Join(p.dir, "ca.pem") }

// Pool returns a pool holding only the CA certificate.
func (p *CA) Pool() *x509.CertPool { return p.pool }

// Issue makes a certificate for name, good as both TLS server and client,
// with name as its common name and DNS SAN, the extra DNS SANs dns, and the
// URI SAN spiffe://spanperf.local/<name>. It writes <name>.pem (certificate
// then key) into the CA's directory. name must be lowercase letters,
// digits, dots and dashes.
func (p *CA) Issue(name string, dns ...string) (Cert, error) {
	if !pkiName.MatchString(name) {
		return Cert{}, fmt.Errorf("pki: bad certificate name %q", name)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Cert{}, fmt.Errorf("pki: key for %s: %w", name, err)
	}
	serial, err := pkiSerial()
	if err != nil {
		return Cert{}, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name, Organization: []string{"spanperf"}},
		DNSNames:     append([]string{name}, dns...),
		URIs:         []*url.URL{{Scheme: "spiffe", Host: TrustDomain, Path: "/" + name}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(7 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		return Cert{}, fmt.Errorf("pki: certificate for %s: %w", name, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return Cert{}, fmt.Errorf("pki: key for %s: %w", name, err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	c := Cert{Name: name, File: filepath.Join(p.dir, name+".pem")}
	if c.TLS, err = tls.X509KeyPair(certPEM, keyPEM); err != nil {
		return Cert{}, fmt.Errorf("pki: key pair for %s: %w", name, err)
	}
	if err := WriteSecret(c.File, append(certPEM, keyPEM...)); err != nil {
		return Cert{}, fmt.Errorf("pki: %w", err)
	}
	return c, nil
}

// Close removes the CA's directory and everything in it.
func (p *CA) Close() error {
	if err := os.RemoveAll(p.dir); err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	return nil
}

// WriteSecret writes data to a new file (it must not exist) readable only
// by its owner.
func WriteSecret(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func pkiSerial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("pki: serial: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil // serials are positive
}

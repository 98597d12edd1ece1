package datapath_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spanperf/spanperf/internal/datapath"
	"github.com/spanperf/spanperf/internal/datapath/datapathtest"
	"github.com/spanperf/spanperf/internal/testbed/netns"
)

func certOpts(t *testing.T) map[string]any {
	opts := datapathtest.Defaults(t, "ipsec")
	opts["auth"] = "cert"
	return opts
}

// With auth: cert the peers authenticate with certificates from the run's
// CA (ECDSA P-256, identity the site's name), and the tunnel carries
// stream, rr and crr; the key files are 0600 while up and gone at close.
func TestIPsecCertCarriesAll(t *testing.T) {
	tb, link := datapathtest.Setup(t, netns.Spec{}, "ipsec", certOpts(t))
	var keys int
	filepath.WalkDir(tb.TempDir(), func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".key") {
			keys++
			if st, _ := os.Stat(p); st.Mode().Perm() != 0o600 {
				t.Errorf("%s mode %v, want 0600", p, st.Mode().Perm())
			}
		}
		return nil
	})
	confs, _ := filepath.Glob(filepath.Join(tb.TempDir(), "ipsec", "*", "swanctl.conf"))
	for _, c := range confs {
		b, err := os.ReadFile(c)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "auth = pubkey") || strings.Contains(string(b), "auth = psk") || strings.Contains(string(b), "secret =") {
			t.Errorf("%s: want certificate authentication and no pre-shared key:\n%s", c, b)
		}
	}
	if len(confs) != 2 {
		t.Errorf("%d swanctl.conf files, want one per site", len(confs))
	}
	if keys != 2 {
		t.Errorf("%d private keys under the run's temp dir, want one per site", keys)
	}
	datapathtest.CarriesAll(t, tb, link)
	if err := link.Close(context.Background()); err != nil {
		t.Fatalf("link close: %v", err)
	}
	if _, err := os.Stat(filepath.Join(tb.TempDir(), "ipsec")); err == nil {
		t.Error("keys, certificates and the CA left after link close")
	}
}

// A site whose certificate comes from a CA the others do not trust gets
// no SA: Setup fails naming the pair and the authentication failure.
// TestIPsecCertCarriesAll is the control.
func TestIPsecCertWrongCA(t *testing.T) {
	datapathtest.New(t, "ipsec", certOpts(t)) // skips where ipsec cannot run
	dp, err := datapath.IPsecForTest(certOpts(t), "b", false, false)
	if err != nil {
		t.Fatal(err)
	}
	tb := datapathtest.Testbed(t, netns.Spec{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	link, err := dp.Setup(ctx, tb)
	if err == nil {
		link.Close(context.Background())
		t.Fatal("setup with a certificate from an untrusted CA succeeded")
	}
	t.Logf("setup error (expected):\n%v", err)
	for _, want := range []string{"ipsec", "a → b", "AUTHENTICATION_FAILED"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("setup error does not name %q", want)
		}
	}
	ipsecCheckGone(t, tb, nil)
}

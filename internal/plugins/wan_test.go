package plugins

import (
	"testing"

	"github.com/spanperf/spanperf/internal/scenario"
)

// TestWANRefusesDatapathsPastTheRouter: a shaped wan (delay, or a rate)
// with a datapath whose sites meet past the wan router (macvlan, ipvlan,
// flannel-*) is refused at parse time by file, line and key, saying why;
// the same datapaths without a shaped wan, and native with one, parse.
func TestWANRefusesDatapathsPastTheRouter(t *testing.T) {
	for _, c := range []struct{ wan, want string }{
		{"wan: {delay: 5ms}\n", "s.yaml:4: datapaths[1]: wan: macvlan: the sites meet on one L2 segment, past the wan router: its rate, delay, jitter and loss would not apply\n" +
			"s.yaml:5: datapaths[2]: wan: flannel-host-gw: the nodes meet on one L2 network, past the wan router: its rate, delay, jitter and loss would not apply"},
		{"wan: {rate: 100mbit}\n", "s.yaml:4: datapaths[1]: wan: macvlan: the sites meet on one L2 segment, past the wan router: its rate, delay, jitter and loss would not apply\n" +
			"s.yaml:5: datapaths[2]: wan: flannel-host-gw: the nodes meet on one L2 network, past the wan router: its rate, delay, jitter and loss would not apply"},
		{"", ""},
	} {
		src := "name: s\ndatapaths:\n  - native\n  - macvlan\n  - flannel-host-gw\nworkloads: [{type: rr}]\n" + c.wan
		_, err := scenario.Parse("s.yaml", []byte(src), Catalog{})
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != c.want {
			t.Errorf("%q:\n%s\nwant:\n%s", c.wan, got, c.want)
		}
	}
}

package scenario

import (
	"strings"
	"testing"
)

func TestParseSizingCells(t *testing.T) {
	for _, tc := range []struct{ src, want, err string }{
		{"datapaths: [native]\nworkloads: [{type: rr}]\n", "", ""},
		{"datapaths: [native]\nworkloads: [{type: rr}]\nsizing_cells: mean-max\n", "mean-max", ""},
		{"datapaths: [native]\nworkloads: [{type: rr}]\nsizing_cells: p50-p99\n", "p50-p99", ""},
		{"datapaths: [native]\nworkloads: [{type: rr}]\nsizing_cells: avg\n", "", `s.yaml:3: sizing_cells: "avg": want one of p50-p99, mean-max`},
	} {
		s, err := Parse("s.yaml", []byte(tc.src), fakeCatalog{})
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err %v, want %q", tc.src, err, tc.err)
			}
		case err != nil:
			t.Errorf("%q: %v", tc.src, err)
		case s.SizingCells != tc.want:
			t.Errorf("%q: sizing_cells %q, want %q", tc.src, s.SizingCells, tc.want)
		}
	}
}

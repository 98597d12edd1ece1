package netns

import (
	"fmt"
	"slices"
)

// RemoveNamespace deletes a namespace AddNamespace made (a datapath's pod
// or gateway, when its Link closes), with every link in it, before the
// testbed closes. Processes started in it must have ended. The ledger
// keeps its entry: `spanperf clean` finds nothing there to remove.
func (tb *Testbed) RemoveNamespace(s *Site) error {
	tb.mu.Lock()
	i := slices.Index(tb.extra, s)
	if i >= 0 && s != tb.wan && !slices.Contains(tb.sites, s) && !slices.Contains(tb.nodes, s) {
		tb.extra = slices.Delete(tb.extra, i, i+1)
	} else {
		i = -1
	}
	tb.mu.Unlock()
	if i < 0 {
		return fmt.Errorf("remove namespace %s: not one the testbed added for a datapath", s.nsName)
	}
	s.release()
	if err := DeleteNamed(s.nsName); err != nil {
		return fmt.Errorf("delete netns %s: %w", s.nsName, err)
	}
	return nil
}

package netns

import "fmt"

// SetSysctl writes val to the sysctl key (dotted, as in
// "net.ipv4.ip_forward") in s's namespace: what a datapath that forwards
// through a site (a hub, a site in the middle of a chain) needs. The
// namespace's removal undoes it.
func (s *Site) SetSysctl(key, val string) error {
	if err := s.Do(func() error { return writeSysctl(key, val) }); err != nil {
		return fmt.Errorf("site %s: %w", s.name, err)
	}
	return nil
}

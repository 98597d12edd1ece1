package agent

import (
	"net/netip"
	"strings"
	"testing"
	"time"
)

// TestMessagingStreamSpecValidate: a spec the stream client cannot run
// is refused with what is wrong; a body too small for the header (the
// sequence number and the intended send time) among them.
func TestMessagingStreamSpecValidate(t *testing.T) {
	ok := MessagingStreamSpec{Target: netip.MustParseAddrPort("198.18.1.2:7100"), Rate: 100, Consumers: 2, BodySize: 16, Duration: time.Second}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid spec: %v", err)
	}
	for want, mod := range map[string]func(*MessagingStreamSpec){
		"no target":         func(s *MessagingStreamSpec) { s.Target = netip.AddrPort{} },
		"rate must be":      func(s *MessagingStreamSpec) { s.Rate = 0 },
		"body size must be": func(s *MessagingStreamSpec) { s.BodySize = 15 },
		"duration must be":  func(s *MessagingStreamSpec) { s.Duration = 0 },
		"consumers must be": func(s *MessagingStreamSpec) { s.Consumers = -1 },
	} {
		s := ok
		mod(&s)
		if err := s.Validate(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v", want, err)
		}
	}
}

package scenario

import "testing"

func TestParseSize(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int64
		err  string
	}{
		{"512", 512, ""},
		{"0", 0, ""},
		{"1k", 1000, ""},
		{"1K", 1000, ""},
		{"1KB", 1000, ""},
		{"1KiB", 1024, ""},
		{"128k", 128000, ""},
		{"1M", 1e6, ""},
		{"1MB", 1e6, ""},
		{"1MiB", 1 << 20, ""},
		{"2G", 2e9, ""},
		{"1GiB", 1 << 30, ""},
		{"1.5KiB", 1536, ""},
		{" 64 B ", 64, ""},
		{"", 0, `size "": not a number`},
		{"abc", 0, `size "abc": not a number`},
		{"1x", 0, `size "1x": unknown unit "x" (use B, k, KiB, M, MiB, G or GiB)`},
		{"-5", 0, `size "-5": must not be negative`},
		{"1.5", 0, `size "1.5": not a whole number`},
		{"1.2.3k", 0, `size "1.2.3k": not a number`},
		{".", 0, `size ".": not a number`},
		{"99999999999GiB", 0, `size "99999999999GiB": too large`},
	} {
		got, err := ParseSize(tt.in)
		if errText(err) != tt.err || got != tt.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d, %q", tt.in, got, err, tt.want, tt.err)
		}
	}
}

func TestParseRate(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int64
		err  string
	}{
		{"", 0, ""},
		{"1000", 1000, ""},
		{"500kbit", 500e3, ""},
		{"100mbit", 100e6, ""},
		{"10Mbit", 10e6, ""},
		{"1gbit", 1e9, ""},
		{"1.5gbit", 1.5e9, ""},
		{"1.1gbit", 1.1e9, ""},
		{"64bit", 64, ""},
		{"100Mbps", 0, `rate "100Mbps": unknown unit "Mbps" (use bit, kbit, mbit or gbit)`},
		{"fast", 0, `rate "fast": not a number`},
		{"0.5bit", 0, `rate "0.5bit": not a whole number`},
		{"-1gbit", 0, `rate "-1gbit": must not be negative`},
	} {
		got, err := ParseRate(tt.in)
		if errText(err) != tt.err || got != tt.want {
			t.Errorf("ParseRate(%q) = %d, %v; want %d, %q", tt.in, got, err, tt.want, tt.err)
		}
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

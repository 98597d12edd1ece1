package report

import (
	"math"
	"testing"
)

func TestFormatValue(t *testing.T) {
	tests := []struct {
		metric string
		v      float64
		want   string
	}{
		{"throughput_bps", 9.412e9, "9.41 Gbit/s"},
		{"throughput_bps", 9.416e9, "9.42 Gbit/s"},
		{"throughput_bps", 1e9, "1.00 Gbit/s"},
		{"throughput_bps", 999.6e6, "1.00 Gbit/s"}, // rounds into the next unit
		{"throughput_bps", 999.4e6, "999 Mbit/s"},
		{"throughput_bps", 94.12e6, "94.1 Mbit/s"},
		{"throughput_bps", 56.7e3, "56.7 kbit/s"},
		{"throughput_bps", 12, "12.0 bit/s"},
		{"throughput_bps", 0, "0 bit/s"},
		{"throughput_bps", 2.5e12, "2.50 Tbit/s"},
		{"latency_p50_s", 1.234, "1.23 s"},
		{"latency_p50_s", 0.0123, "12.3 ms"},
		{"latency_p99_s", 52e-6, "52.0 µs"},
		{"latency_p99_s", 0.9996e-3, "1.00 ms"},
		{"latency_max_s", 450e-9, "450 ns"},
		{"duration_s", 125, "125 s"},
		{"duration_s", 1234, "1230 s"},
		{"transactions_per_s", 12345, "12.3k/s"},
		{"transactions_per_s", 850, "850/s"},
		{"transactions_per_s", 1.2e6, "1.20M/s"},
		{"connections_per_s", 3.5, "3.50/s"},
		{"rss_bytes", 1.5 * (1 << 20), "1.50 MiB"},
		{"rss_bytes", 512, "512 B"},
		{"rss_bytes", 2048, "2.00 KiB"},
		{"cpu_cores_generator", 0.734, "0.734"},
		{"throughput_bps_per_core", 1.026e8, "103 Mbit/s"},
		{"transactions_per_s_per_core", 57700, "57.7k/s"},
		{"cpu_cores_generator", 1.5, "1.50"},
		{"retransmits", 12345, "12.3k"},
		{"retransmits", 0.0001234, "1.23e-04"},
		{"throughput_bps", -2.5e9, "-2.50 Gbit/s"},
		{"throughput_bps", math.NaN(), "NaN"},
		{"latency_p50_s", math.Inf(1), "+Inf"},
	}
	for _, tt := range tests {
		if got := FormatValue(tt.metric, tt.v); got != tt.want {
			t.Errorf("FormatValue(%q, %v) = %q, want %q", tt.metric, tt.v, got, tt.want)
		}
	}
}

func TestFormatInterval(t *testing.T) {
	tests := []struct {
		metric         string
		median, lo, hi float64
		want           string
	}{
		{"throughput_bps", 9.41e9, 9.38e9, 9.45e9, "9.41 Gbit/s [9.38, 9.45]"},
		{"throughput_bps", 1.01e9, 0.987e9, 1.05e9, "1.01 Gbit/s [0.987, 1.05]"},
		{"latency_p50_s", 30.1e-6, 29.8e-6, 30.3e-6, "30.1 µs [29.8, 30.3]"},
		{"transactions_per_s", 31200, 31000, 31500, "31.2k/s [31.0, 31.5]"},
	}
	for _, tt := range tests {
		if got := formatInterval(tt.metric, tt.median, tt.lo, tt.hi); got != tt.want {
			t.Errorf("formatInterval(%q, %v, %v, %v) = %q, want %q", tt.metric, tt.median, tt.lo, tt.hi, got, tt.want)
		}
	}
}

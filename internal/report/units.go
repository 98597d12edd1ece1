package report

import (
	"math"
	"strconv"
	"strings"
)

// unit is a display unit: values are divided by div and followed by name.
type unit struct {
	div  float64
	name string
}

// scale is a family of units for one kind of metric, largest first.
type scale struct {
	units []unit
	// sep goes between the number and the unit name.
	sep string
}

var (
	bitsScale = scale{sep: " ", units: []unit{
		{1e12, "Tbit/s"}, {1e9, "Gbit/s"}, {1e6, "Mbit/s"}, {1e3, "kbit/s"}, {1, "bit/s"}}}
	secondsScale = scale{sep: " ", units: []unit{
		{1, "s"}, {1e-3, "ms"}, {1e-6, "µs"}, {1e-9, "ns"}}}
	rateScale = scale{units: []unit{
		{1e12, "T/s"}, {1e9, "G/s"}, {1e6, "M/s"}, {1e3, "k/s"}, {1, "/s"}}}
	bytesScale = scale{sep: " ", units: []unit{
		{1 << 40, "TiB"}, {1 << 30, "GiB"}, {1 << 20, "MiB"}, {1 << 10, "KiB"}, {1, "B"}}}
	plainScale = scale{units: []unit{
		{1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "k"}, {1, ""}}}
	// Values in µs (cpu_us_per_transaction).
	microsScale = scale{sep: " ", units: []unit{
		{1e6, "s"}, {1e3, "ms"}, {1, "µs"}, {1e-3, "ns"}}}
	// CPU-seconds per 10⁹ bytes (cpu_seconds_per_gigabyte).
	perGBScale = scale{sep: " ", units: []unit{
		{1, "s/GB"}, {1e-3, "ms/GB"}, {1e-6, "µs/GB"}}}
)

// scaleFor picks the unit family by the metric name's suffix.
func scaleFor(metric string) scale {
	metric = strings.TrimSuffix(metric, "_per_core") // a rate per core reads as the rate
	metric = strings.TrimSuffix(metric, "_per_site") // so does a cost per site
	switch {
	case strings.HasPrefix(metric, "rss_bytes"): // rss_bytes_max{C}, rss_bytes_added_per_connection, ...
		return bytesScale
	case strings.HasSuffix(metric, "_us_per_transaction"):
		return microsScale
	case strings.HasSuffix(metric, "_seconds_per_gigabyte"):
		return perGBScale
	case strings.HasSuffix(metric, "_bps"):
		return bitsScale
	case strings.HasSuffix(metric, "_per_s"):
		return rateScale
	case strings.HasSuffix(metric, "_s"):
		return secondsScale
	case strings.HasSuffix(metric, "_bytes"):
		return bytesScale
	}
	return plainScale
}

// pick returns the largest unit in which v, rounded to 3 significant digits,
// is at least 1, or the smallest unit when there is none.
func (sc scale) pick(v float64) unit {
	r := math.Abs(roundSig(v))
	for _, u := range sc.units {
		if r >= u.div {
			return u
		}
	}
	return sc.units[len(sc.units)-1]
}

// FormatValue renders v, a value of the named metric in its base unit, with
// 3 significant digits in a unit chosen by the metric name's suffix:
//
//	_bps    bits/s as Tbit/s, Gbit/s, Mbit/s, kbit/s or bit/s ("9.41 Gbit/s")
//	_per_s  a rate with an SI prefix: "12.3k/s", "1.20M/s", "850/s"
//	_s      seconds as s, ms, µs or ns ("1.25 ms")
//	_bytes  bytes as TiB, GiB, MiB, KiB or B (binary prefixes: "1.50 MiB")
//	_us_per_transaction  µs as s, ms, µs or ns ("2.09 ms")
//	_seconds_per_gigabyte  as s/GB, ms/GB or µs/GB ("0.473 s/GB")
//	_per_core  as the rest of the name without it ("throughput_bps_per_core" as _bps)
//	other   a plain number, with k, M, G or T from 1000 up ("0.734", "12.3k")
//
// Trailing zeros are kept, so every value shows 3 digits ("2.00 ms").
// NaN and infinities are written as "NaN", "+Inf" and "-Inf".
func FormatValue(metric string, v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nonFinite(v)
	}
	sc := scaleFor(metric)
	u := sc.pick(v)
	return formatIn(v, u) + unitSuffix(sc, u)
}

// formatInterval renders "median [lo, hi]", with lo and hi in the unit chosen
// for the median.
func formatInterval(metric string, median, lo, hi float64) string {
	if math.IsNaN(median) || math.IsInf(median, 0) {
		return nonFinite(median)
	}
	sc := scaleFor(metric)
	u := sc.pick(median)
	return formatIn(median, u) + unitSuffix(sc, u) + " [" + formatIn(lo, u) + ", " + formatIn(hi, u) + "]"
}

func unitSuffix(sc scale, u unit) string {
	if u.name == "" {
		return ""
	}
	return sc.sep + u.name
}

func nonFinite(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	}
	return "NaN"
}

// formatIn writes v/u.div with 3 significant digits in fixed-point notation,
// falling back to exponent notation below 0.001.
func formatIn(v float64, u unit) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nonFinite(v)
	}
	x := roundSig(v / u.div)
	if x == 0 {
		return "0"
	}
	exp := decimalExponent(x)
	if exp < -3 {
		return strconv.FormatFloat(x, 'e', 2, 64)
	}
	return strconv.FormatFloat(x, 'f', max(0, 2-exp), 64)
}

// roundSig rounds v to 3 significant decimal digits.
func roundSig(v float64) float64 {
	r, err := strconv.ParseFloat(strconv.FormatFloat(v, 'e', 2, 64), 64)
	if err != nil {
		return v
	}
	return r
}

// decimalExponent is the power of ten of v's leading digit, taken from its
// decimal form so it is exact for values already rounded by roundSig.
func decimalExponent(v float64) int {
	s := strconv.FormatFloat(v, 'e', 2, 64)
	exp, err := strconv.Atoi(s[strings.IndexByte(s, 'e')+1:])
	if err != nil {
		return 0
	}
	return exp
}

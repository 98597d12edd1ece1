package scenario

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
)

// errNotNumber says a size or rate does not start with a number.
var errNotNumber = errors.New("not a number")

// ParseSize parses a byte count: a number with an optional unit, any case:
// B; k, kB = 1000; KiB = 1024; and likewise M, MiB, G, GiB, T, TiB. A
// fraction is accepted when the result is whole ("1.5KiB" is 1536).
func ParseSize(s string) (int64, error) {
	n, err := parseSize(s)
	if err != nil {
		return 0, fmt.Errorf("size %q: %w", s, err)
	}
	return n, nil
}

// ParseRate parses a bit rate in bits per second: a number with an optional
// tc-style unit, any case: bit, kbit = 10³, mbit = 10⁶, gbit = 10⁹, tbit =
// 10¹² bits/s ("100mbit", "1.5gbit"). The empty string is 0, unshaped.
func ParseRate(s string) (int64, error) {
	n, err := parseRate(s)
	if err != nil {
		return 0, fmt.Errorf("rate %q: %w", s, err)
	}
	return n, nil
}

// parseSize is ParseSize with errors that do not repeat s.
func parseSize(s string) (int64, error) {
	return parseUnits(s, sizeUnit, "B, k, KiB, M, MiB, G or GiB")
}

// parseRate is ParseRate with errors that do not repeat s.
func parseRate(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	return parseUnits(s, rateUnit, "bit, kbit, mbit or gbit")
}

func sizeUnit(u string) int64 {
	switch strings.ToLower(u) {
	case "", "b":
		return 1
	case "k", "kb":
		return 1e3
	case "kib":
		return 1 << 10
	case "m", "mb":
		return 1e6
	case "mib":
		return 1 << 20
	case "g", "gb":
		return 1e9
	case "gib":
		return 1 << 30
	case "t", "tb":
		return 1e12
	case "tib":
		return 1 << 40
	}
	return 0
}

func rateUnit(u string) int64 {
	switch strings.ToLower(u) {
	case "", "bit":
		return 1
	case "kbit":
		return 1e3
	case "mbit":
		return 1e6
	case "gbit":
		return 1e9
	case "tbit":
		return 1e12
	}
	return 0
}

// parseUnits parses a decimal number followed by a unit that unit maps to a
// multiplier (0 if unknown), exactly, into a whole int64.
func parseUnits(s string, unit func(string) int64, units string) (int64, error) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "-") {
		return 0, errors.New("must not be negative")
	}
	i := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if i < 0 {
		i = len(s)
	}
	num, u := s[:i], strings.TrimSpace(s[i:])
	if strings.Trim(num, ".") == "" || strings.Count(num, ".") > 1 {
		return 0, errNotNumber
	}
	mult := unit(u)
	if mult == 0 {
		return 0, fmt.Errorf("unknown unit %q (use %s)", u, units)
	}
	r, ok := new(big.Rat).SetString(num)
	if !ok {
		return 0, errNotNumber
	}
	r.Mul(r, new(big.Rat).SetInt64(mult))
	if !r.IsInt() {
		return 0, errors.New("not a whole number")
	}
	if !r.Num().IsInt64() {
		return 0, errors.New("too large")
	}
	return r.Num().Int64(), nil
}

// canon converts a Go value, such as a Field.Default, to the type values of
// kind k are stored as; it returns v unchanged when it cannot.
func canon(k Kind, v any) any {
	rv := reflect.ValueOf(v)
	s, isString := v.(string)
	switch k {
	case KindInt, KindSize, KindRate:
		switch {
		case rv.CanInt():
			return rv.Int()
		case rv.CanUint() && rv.Uint() <= math.MaxInt64:
			return int64(rv.Uint())
		case isString && k == KindSize:
			if n, err := ParseSize(s); err == nil {
				return n
			}
		case isString && k == KindRate:
			if n, err := ParseRate(s); err == nil {
				return n
			}
		}
	case KindFloat:
		switch {
		case rv.CanFloat():
			return rv.Float()
		case rv.CanInt():
			return float64(rv.Int())
		case rv.CanUint():
			return float64(rv.Uint())
		}
	case KindDuration:
		if isString {
			if d, err := time.ParseDuration(s); err == nil {
				return d
			}
		}
	}
	return v
}

// checkValue returns what is wrong with the stored value v of field f, or "".
func checkValue(f Field, v any) string {
	var num float64
	var shown string
	lo, hasLo := f.Min, f.HasMin
	switch f.Kind {
	case KindInt, KindSize, KindRate:
		x, ok := v.(int64)
		if !ok {
			return wantGo(f.Kind, v)
		}
		if f.Kind != KindInt && (!hasLo || lo < 0) {
			lo, hasLo = 0, true
		}
		num, shown = float64(x), strconv.FormatInt(x, 10)
	case KindFloat:
		x, ok := v.(float64)
		if !ok {
			return wantGo(f.Kind, v)
		}
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Sprintf("want a finite number, got %v", x)
		}
		num, shown = x, strconv.FormatFloat(x, 'g', -1, 64)
	case KindDuration:
		x, ok := v.(time.Duration)
		if !ok {
			return wantGo(f.Kind, v)
		}
		if x < 0 {
			return fmt.Sprintf("must be ≥ 0s, got %v", x)
		}
		return ""
	case KindString:
		x, ok := v.(string)
		if !ok {
			return wantGo(f.Kind, v)
		}
		if len(f.Enum) > 0 && !slices.Contains(f.Enum, x) {
			return fmt.Sprintf("must be one of %s, got %q", strings.Join(f.Enum, ", "), x)
		}
		return ""
	case KindBool:
		if _, ok := v.(bool); !ok {
			return wantGo(f.Kind, v)
		}
		return ""
	default:
		return fmt.Sprintf("unknown kind %d", int(f.Kind))
	}
	if hasLo && num < lo {
		return fmt.Sprintf("must be ≥ %s, got %s", strconv.FormatFloat(lo, 'g', -1, 64), shown)
	}
	return ""
}

func wantGo(k Kind, v any) string {
	if v == nil {
		return fmt.Sprintf("want %s, got nothing", k)
	}
	return fmt.Sprintf("want %s, got %v (%T)", k, v, v)
}

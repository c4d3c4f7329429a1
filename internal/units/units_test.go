package units

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want time.Duration
		err  string // "" = no error; else a part of the message
	}{
		{"7d", 7 * Day, ""},
		{"36h", 36 * time.Hour, ""},
		{"1d12h", 36 * time.Hour, ""},
		{"90m", 90 * time.Minute, ""},
		{"1h30m", 90 * time.Minute, ""},
		{"200ms", 200 * time.Millisecond, ""},
		{"1.5s", 1500 * time.Millisecond, ""},
		{"+2d", 2 * Day, ""},
		{"007d", 7 * Day, ""},
		{"1d0s", Day, ""},
		// Zero and negative values parse; callers range-check.
		{"0", 0, ""},
		{"0s", 0, ""},
		{"0d", 0, ""},
		{"-0d", 0, ""},
		{"-5m", -5 * time.Minute, ""},
		{"-1d12h", -36 * time.Hour, ""},
		{"-7d", -7 * Day, ""},
		// Errors.
		{"", 0, `invalid duration ""`},
		{"d", 0, "invalid duration"},
		{"-", 0, "invalid duration"},
		{"-d", 0, "invalid duration"},
		{"7", 0, "invalid duration"},
		{"7x", 0, `invalid duration "7x"`},
		{"7days", 0, "invalid duration"},
		{"1.5d", 0, "invalid duration"},
		{"1d1x", 0, "invalid duration"},
		{"1d-1h", 0, "invalid duration"},
		{"1d+1h", 0, "invalid duration"},
		{"--1h", 0, "invalid duration"},
		{"12h1d", 0, "invalid duration"},
		{" 7d", 0, "invalid duration"},
		{"soon", 0, "invalid duration"},
		{"106752d", 0, "too many days"},
		{"99999999999999999999d", 0, "too many days"},
		{"106751d24h", 0, "too long"},
		{"9999999999h", 0, "invalid duration"},
	}
	for _, tt := range tests {
		got, err := ParseDuration(tt.in)
		if got != tt.want || (err == nil) != (tt.err == "") || (err != nil && !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v, %q", tt.in, got, err, tt.want, tt.err)
		}
		if err != nil && !errors.Is(err, ErrDuration) {
			t.Errorf("ParseDuration(%q): error %v does not wrap ErrDuration", tt.in, err)
		}
	}
}

func TestFormatDuration(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		0:                         "0s",
		7 * Day:                   "7d",
		2 * Day:                   "2d",
		Day:                       "24h",
		-Day:                      "-24h",
		36 * time.Hour:            "36h",
		-7 * Day:                  "-7d",
		90 * time.Minute:          "90m",
		10 * time.Second:          "10s",
		-5 * time.Minute:          "-5m",
		100 * time.Millisecond:    "100ms",
		1500 * time.Millisecond:   "1.5s",
		time.Hour + time.Second/2: "1h0m0.5s",
	} {
		if got := FormatDuration(d); got != want {
			t.Errorf("FormatDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

// FuzzParseDuration: ParseDuration never panics, agrees with
// time.ParseDuration on text without days, and reads FormatDuration's
// output back to the same value.
func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"7d", "1d12h", "-5m", "0", "0d", "1.5d", "1d-1h", "106751d23h", "200ms", "+3d4µs", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDuration(s)
		if !strings.Contains(s, "d") {
			td, terr := time.ParseDuration(s)
			// time.ParseDuration reads the smallest duration, whose
			// magnitude ParseDuration (sign applied last) cannot hold.
			disagree := (terr == nil) != (err == nil) && td != math.MinInt64
			if disagree || (terr == nil && err == nil && td != d) {
				t.Fatalf("ParseDuration(%q) = %v, %v; time.ParseDuration = %v, %v", s, d, err, td, terr)
			}
		}
		if err != nil {
			return
		}
		back, err := ParseDuration(FormatDuration(d))
		if err != nil || back != d {
			t.Fatalf("ParseDuration(FormatDuration(%v) = %q) = %v, %v", d, FormatDuration(d), back, err)
		}
	})
}

func TestParseBytes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want int64
		err  string
	}{
		{"4g", 4 << 30, ""},
		{"512m", 512 << 20, ""},
		{"512M", 512 << 20, ""},
		{"4gb", 4 << 30, ""},
		{"4GB", 4 << 30, ""},
		{"4GiB", 4 << 30, ""},
		{"1.5g", 3 << 29, ""},
		{"65536k", 64 << 20, ""},
		{"2t", 2 << 40, ""},
		{"1p", 1 << 50, ""},
		{"4096", 4096, ""},
		{"100b", 100, ""},
		{" 4 g ", 4 << 30, ""},
		{"0", 0, ""},
		{"0.5k", 512, ""},
		{"1.0001b", 1, ""},
		{"", 0, `invalid size ""`},
		{"g", 0, "invalid size"},
		{"4x", 0, `invalid size "4x"`},
		{"-1g", 0, "invalid size"},
		{"1e3g", 0, "invalid size"},
		{"1.g", 0, "invalid size"},
		{".5g", 0, "invalid size"},
		{"4bb", 0, "invalid size"},
		{"4ib", 0, "invalid size"},
		{"4 g b", 0, "invalid size"},
		{"8192p", 0, "too large"},
		{"9223372036854775807", 0, "too large"},
		{"99999999999999999999999999999999t", 0, "too large"},
	}
	for _, tt := range tests {
		got, err := ParseBytes(tt.in)
		if got != tt.want || (err == nil) != (tt.err == "") || (err != nil && !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d, %q", tt.in, got, err, tt.want, tt.err)
		}
		if err != nil && !errors.Is(err, ErrSize) {
			t.Errorf("ParseBytes(%q): error %v does not wrap ErrSize", tt.in, err)
		}
	}
}

// FuzzParseBytes: ParseBytes never panics and never returns a negative
// size.
func FuzzParseBytes(f *testing.F) {
	for _, s := range []string{"4g", "512M", "1.5g", "4GiB", "8191.99p", "1e3g", " 7 k", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseBytes(s)
		if err == nil && n < 0 {
			t.Fatalf("ParseBytes(%q) = %d", s, n)
		}
		if err != nil && n != 0 {
			t.Fatalf("ParseBytes(%q) = %d with error %v", s, n, err)
		}
	})
}

func TestFormatBytes(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]string{
		0:             "0 B",
		5:             "5 B",
		1023:          "1023 B",
		1024:          "1.0 KB",
		2048:          "2.0 KB",
		1536 << 10:    "1.5 MB",
		4 << 30:       "4.0 GB",
		3 << 40:       "3.0 TB",
		math.MaxInt64: "8.0 EB",
	} {
		if got := FormatBytes(n); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

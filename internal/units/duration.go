// Package units parses and prints the durations and byte sizes people write
// in configuration files and on the command line ("7d", "1d12h", "90s";
// "512m", "4g"). It is the one owner of these forms: every package that
// reads or shows them calls it, so they read the same everywhere.
//
// The parsers judge syntax only. Zero and negative values are not errors
// here, because what is acceptable differs per setting (a timeout, a
// retention period, a script's delay): every caller checks the range it
// needs and says what it wants.
package units

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
)

// Day is the length of the unit d: 24 hours, ignoring daylight saving
// (caddy's ParseDuration counts days the same way).
const Day = 24 * time.Hour

// ErrDuration is wrapped by every error of ParseDuration.
var ErrDuration = errors.New("invalid duration")

// ParseDuration parses what time.ParseDuration does ("90s", "1h30m",
// "-5m", "0") and also a leading whole number of days: "7d", "1d12h",
// "+2d". A sign applies to the whole duration and comes first ("-1d12h"
// is minus 36 hours; "1d-1h" is an error). Days are whole: write "36h"
// rather than "1.5d".
//
// Zero ("0", "0d") and negative values parse: ParseDuration never judges a
// value's range, its caller does. Errors wrap ErrDuration and quote s.
func ParseDuration(s string) (time.Duration, error) {
	rest, neg := s, false
	if rest != "" && (rest[0] == '-' || rest[0] == '+') {
		neg, rest = rest[0] == '-', rest[1:]
	}
	i := 0
	for i < len(rest) && '0' <= rest[i] && rest[i] <= '9' {
		i++
	}
	var d time.Duration
	if i > 0 && i < len(rest) && rest[i] == 'd' {
		n, err := strconv.ParseInt(rest[:i], 10, 64)
		if err != nil || n > int64(math.MaxInt64/Day) {
			return 0, fmt.Errorf("%w %q: too many days", ErrDuration, s)
		}
		d, rest = time.Duration(n)*Day, rest[i+1:]
		if rest == "" {
			if neg {
				d = -d
			}
			return d, nil
		}
	}
	if rest == "" || rest[0] == '-' || rest[0] == '+' {
		return 0, fmt.Errorf("%w %q", ErrDuration, s)
	}
	x, err := time.ParseDuration(rest)
	if err != nil {
		return 0, fmt.Errorf("%w %q", ErrDuration, s)
	}
	if x > math.MaxInt64-d {
		return 0, fmt.Errorf("%w %q: too long", ErrDuration, s)
	}
	d += x
	if neg {
		d = -d
	}
	return d, nil
}

// FormatDuration prints d in the largest unit that divides it exactly,
// the way people write it in settings: "7d", "36h", "90m", "10s". A day
// itself prints as "24h", the way timeouts are usually written. Anything
// else prints as time.Duration.String does ("1.5s", "1h0m0.5s").
// ParseDuration reads every result back to d.
func FormatDuration(d time.Duration) string {
	switch {
	case d == 0:
		return "0s"
	case d%Day == 0 && d != Day && d != -Day:
		return fmt.Sprintf("%dd", d/Day)
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	case d%time.Second == 0:
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return d.String()
}

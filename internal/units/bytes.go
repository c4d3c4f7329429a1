package units

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	dockerunits "github.com/docker/go-units"
)

// ErrSize is wrapped by every error of ParseBytes.
var ErrSize = errors.New("invalid size")

// sizePattern is a number, optional blanks and an optional unit: b, or
// k, m, g, t, p with an optional b or ib ("4g", "4gb", "4GiB", "512M").
// It is stricter than go-units' RAMInBytes, which also reads exponents
// ("1e30g") and turns values beyond int64 into negative ones.
var sizePattern = regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?)\s*(?:([kmgtpKMGTP])(?:[iI]?[bB])?|[bB])?$`)

var multipliers = map[string]float64{
	"":  1,
	"k": dockerunits.KiB, "m": dockerunits.MiB, "g": dockerunits.GiB,
	"t": dockerunits.TiB, "p": dockerunits.PiB,
}

// ParseBytes parses a size in bytes with an optional binary unit, the
// forms of Yao's and Docker's memory settings: "512m", "512M", "4g",
// "4gb", "4GiB", "1.5g", "2t", "4096" (bytes), "100b". Units are
// powers of 1024 whatever their spelling. Blanks around the text and
// between number and unit are allowed.
//
// Zero parses; there is no sign, so nothing is negative. Fractions round
// down to whole bytes. ParseBytes never judges a value's range, its caller
// does. Errors wrap ErrSize and quote s.
func ParseBytes(s string) (int64, error) {
	m := sizePattern.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, fmt.Errorf("%w %q", ErrSize, s)
	}
	f, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0, fmt.Errorf("%w %q", ErrSize, s)
	}
	n := f * multipliers[strings.ToLower(m[2])]
	// float64(math.MaxInt64) rounds up to 2^63, which int64 cannot hold.
	if n >= math.MaxInt64 {
		return 0, fmt.Errorf("%w %q: too large", ErrSize, s)
	}
	return int64(n), nil
}

// byteUnits are FormatBytes' units: powers of 1024 written without the i,
// the way file managers and the Docker CLI show sizes.
var byteUnits = []string{"B", "KB", "MB", "GB", "TB", "PB", "EB"}

// FormatBytes prints n bytes for people: "512 B", "2.0 KB", "1.5 MB",
// "4.0 GB" (powers of 1024, one decimal above a kilobyte).
func FormatBytes(n int64) string {
	if n < dockerunits.KiB {
		return fmt.Sprintf("%d B", n)
	}
	return dockerunits.CustomSize("%.1f %s", float64(n), dockerunits.KiB, byteUnits)
}

//go:build tools

// Package tools pins the gVisor commands scripts/ensure-gvisor.sh builds,
// so `go mod tidy` keeps their dependencies.
package tools

import (
	_ "gvisor.dev/gvisor/runsc"
	_ "gvisor.dev/gvisor/shim"
)

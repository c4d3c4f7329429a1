package main

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func runVersion(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	v := version
	if bi, ok := debug.ReadBuildInfo(); ok && v == "dev" {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v = "dev+" + s.Value[:12]
			}
		}
	}
	fmt.Fprintf(stdout, "agentbox %s\n", v)
	return 0
}

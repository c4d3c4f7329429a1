package main

import (
	"context"
	"fmt"
	"io"
)

func runRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "agentbox run: not built yet")
	return 1
}

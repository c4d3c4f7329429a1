package main

import (
	"context"
	"fmt"
	"io"
)

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "agentbox serve: not built yet")
	return 1
}

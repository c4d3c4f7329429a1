package main

import (
	"context"
	"fmt"
	"io"
)

func runWorkspaces(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "agentbox workspaces: not built yet")
	return 1
}

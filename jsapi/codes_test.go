package jsapi

import (
	"context"
	"fmt"
	"testing"

	"github.com/agentbox/agentbox/sandbox"
)

// TestCodeForSandboxSentinels: the workspace's sentinels keep their codes
// through wrapping, and a hook's own deadline stays HOOK_TIMEOUT.
func TestCodeForSandboxSentinels(t *testing.T) {
	t.Parallel()
	for err, want := range map[error]string{
		&sandbox.SpecialFileError{Op: "read", Path: "p", Kind: "socket"}: CodeSpecialFile,
		fmt.Errorf("write %q: %w", "big", sandbox.ErrDiskFull):           CodeDiskFull,
		fmt.Errorf("read %q: %w", "big", sandbox.ErrFileTooLarge):        CodeFileTooLarge,
		fmt.Errorf("read %q: %w", "notes.txt", context.DeadlineExceeded): CodeHookTimeout,
		fmt.Errorf("list %q: %w", "x", sandbox.ErrPathOutside):           CodePathOutside,
	} {
		if got := codeFor(err, CodeIO); got != want {
			t.Errorf("codeFor(%v) = %s, want %s", err, got, want)
		}
	}
}

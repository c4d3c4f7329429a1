package opencode

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a run leaves a goroutine behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/docker/docker/client.(*Client).Close"))
}

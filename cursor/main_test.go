package cursor

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a run leaves a goroutine behind (the
// parser, stderr copy and wait goroutines every run starts).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

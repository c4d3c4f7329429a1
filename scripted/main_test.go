package scripted_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that servers leave no goroutine behind once closed. Idle
// keep-alive client connections of http.DefaultClient are not the server's.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
	)
}

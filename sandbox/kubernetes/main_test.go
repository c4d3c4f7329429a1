package kubernetes_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The tests' own admin clients keep their HTTP/2 connections in
// client-go's shared transport cache until the process ends.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("golang.org/x/net/http2.(*ClientConn).readLoop"))
}

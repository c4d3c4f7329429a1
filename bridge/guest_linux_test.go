package bridge

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"testing"
)

// TestStartLockedSurvivesThreadExits: the CLI gets Pdeathsig when the
// thread that started it ends; goroutines that end locked to their
// threads (which the runtime then ends) must not take it down.
func TestStartLockedSurvivesThreadExits(t *testing.T) {
	cmd := exec.Command("sleep", "600")
	setPdeathsig(cmd)
	waited, err := startLocked(cmd)
	if err != nil {
		t.Fatal(err)
	}
	// Each goroutine ends locked to its thread: the runtime ends the
	// thread. Enough of them that, unlocked, the starting thread would
	// be among them.
	for range 50 {
		var wg sync.WaitGroup
		for range runtime.GOMAXPROCS(0) * 4 {
			wg.Go(func() { runtime.LockOSThread() })
		}
		wg.Wait()
	}
	select {
	case err := <-waited:
		t.Fatalf("the child ended while this process runs: %v", err)
	default:
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	if err := <-waited; err == nil {
		t.Fatal("the killed child exited cleanly")
	}
}

// Package flock takes advisory file locks (flock(2)) that wait as long as
// a context allows, where the system call would wait without end.
package flock

import (
	"context"
	"errors"
	"os"
	"syscall"
	"time"
)

// Lock locks f, shared or exclusive, trying again every poll until it
// gets the lock or ctx ends (its error). The lock goes with f's close.
func Lock(ctx context.Context, f *os.File, exclusive bool, poll time.Duration) error {
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	for {
		err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(poll):
		}
	}
}

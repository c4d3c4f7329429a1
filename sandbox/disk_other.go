//go:build !linux

package sandbox

import (
	"context"
	"errors"
	"io/fs"
	"time"
)

// Loop devices are Linux's: elsewhere workspaces are limited by DiskWatch.

var errNoLoop = errors.New("loop-mounted workspaces need Linux")

type loopDevice struct{ dev, number, backing string }

func loopDevices() []loopDevice                       { return nil }
func mountsUnder(dir string) []string                 { return nil }
func mountImage(img, dir string) error                { return errNoLoop }
func unmount(dir string) error                        { return nil }
func detachLoop(dev string) error                     { return errNoLoop }
func probeLoop(ctx context.Context, dir string) error { return errNoLoop }

func deviceNumber(dev string) string { return "" }

func syncFS(dir string) error { return errNoLoop }

// changeTime is st's modification time here: the change time is not
// portable.
func changeTime(st fs.FileInfo) time.Time { return st.ModTime() }

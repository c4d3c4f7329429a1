package bridge

import (
	"os"
	"syscall"
)

// identify is the identity of the binary at path whose stat is st.
func identify(path string, st os.FileInfo) binaryID {
	id := binaryID{path: path, size: st.Size(), mtime: st.ModTime().UnixNano()}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		id.dev, id.ino, id.ctime, id.identified = sys.Dev, sys.Ino, sys.Ctim.Nano(), true
	}
	return id
}

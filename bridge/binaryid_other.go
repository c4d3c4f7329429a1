//go:build !linux

package bridge

import "os"

// identify is the identity of the binary at path whose stat is st: its
// path, size and modification time only, which the process's own cache
// may key by, not the key kept on disk.
func identify(path string, st os.FileInfo) binaryID {
	return binaryID{path: path, size: st.Size(), mtime: st.ModTime().UnixNano()}
}

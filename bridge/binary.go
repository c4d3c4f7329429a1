package bridge

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// executeOnly returns an execute-only (0711) copy of the agentbox binary
// in dir (made when missing), once per binary and kept: the kernel makes a process whose
// binary its user cannot read non-dumpable from its start, so the agent's
// processes cannot open the in-sandbox relays' /proc/PID/fd (the CLI's
// input and output pass through them). A binary that is not readable by
// others already is used as it is; where no copy can be made, too (the
// relays also make themselves non-dumpable, see Harden).
func executeOnly(binary, dir string) (string, error) {
	st, err := os.Stat(binary)
	if err != nil {
		return "", fmt.Errorf("bridge binary: %w", err)
	}
	if st.Mode().Perm()&0o044 == 0 {
		return binary, nil
	}
	// Traversable by the sandbox user, who runs the copy (the local
	// runtime binds it as that user), not listable.
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return binary, nil
	}
	name := filepath.Join(dir, fmt.Sprintf("agentbox-%x-%d", st.ModTime().UnixNano(), st.Size()))
	if cst, err := os.Stat(name); err == nil && cst.Mode().Perm() == 0o711 && cst.Size() == st.Size() {
		return name, nil
	}
	src, err := os.Open(binary)
	if err != nil {
		return binary, nil
	}
	defer src.Close()
	tmp, err := os.CreateTemp(dir, ".agentbox-*")
	if err != nil {
		return binary, nil
	}
	defer os.Remove(tmp.Name())
	_, err = io.Copy(tmp, src)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o711)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), name)
	}
	if err != nil {
		return binary, nil
	}
	return name, nil
}

package docker

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"

	"github.com/agentbox/agentbox/sandbox"
)

// DefaultGVisorReadable are the programs a gVisor sandbox gets readable
// copies of where its image has them execute-only: each sandbox image's
// CLI (0711, so that under runc the kernel keeps the agent's processes out
// of the CLI's /proc/PID/fd, memory and ptrace; scripts/build-image.sh's
// execute_only).
var DefaultGVisorReadable = []string{
	"/usr/local/bin/claude",
	"/opt/codex/bin/codex", "/opt/codex/bin/codex-code-mode-host",
	"/opt/gemini-cli/node",
	"/usr/local/bin/opencode",
	"/opt/cursor-agent/node",
}

// readableCopies makes readable copies of an image's execute-only
// programs for gVisor sandboxes. gVisor's kernel reads a program itself,
// with the rights of the process that runs it, so it cannot run one its
// user may not read (gvisor.dev/issue/160); a sandbox on gVisor runs the
// copy, bind-mounted read-only over the original. Copies are made once
// per image and program, from one container of the image that never
// starts, in dir, and kept while in use.
type readableCopies struct {
	dir string

	mu   sync.Mutex
	keys map[string]*sync.Mutex // one maker per copy
}

// copyMaxAge is how long a copy no sandbox has used is kept.
const copyMaxAge = 24 * time.Hour

// readableMounts returns the read-only mounts of readable copies of the image's
// programs in paths that its user may not read (none for programs that
// are readable, or missing, in the image).
// readableMounts returns the read-only mounts of readable copies of the
// image's programs in paths that its user may not read (none for programs
// that are readable, or missing, in the image).
func (r *Runtime) readableMounts(ctx context.Context, image string, paths []string) ([]sandbox.Mount, error) {
	if len(paths) == 0 {
		return nil, nil
	}
	ictx, cancel := r.call(ctx)
	ins, err := r.cli.ImageInspect(ictx, image)
	cancel()
	if err != nil {
		if cerrdefs.IsNotFound(err) && ctx.Err() == nil {
			return nil, fmt.Errorf("docker create: image %q is not on this engine (agentbox never pulls; build or load it, e.g. `make image`): %w", image, err)
		}
		return nil, r.engineErr(ctx, "image inspect", err)
	}
	srcs, err := r.readable.get(ctx, r, ins.ID, paths)
	if err != nil {
		return nil, fmt.Errorf("docker create: readable copies of the image's programs for gVisor: %w", err)
	}
	var out []sandbox.Mount
	for i, src := range srcs {
		if src != "" {
			out = append(out, sandbox.Mount{Source: src, Target: paths[i]})
		}
	}
	return out, nil
}

// get returns the copy of each of image's programs at paths ("" where the
// image has none, or its user may already read it), making those missing
// from one container of the image.
func (c *readableCopies) get(ctx context.Context, r *Runtime, imageID string, paths []string) ([]string, error) {
	c.mu.Lock()
	m, ok := c.keys[imageID]
	if !ok {
		m = &sync.Mutex{}
		c.keys[imageID] = m
	}
	c.mu.Unlock()
	m.Lock()
	defer m.Unlock()
	out := make([]string, len(paths))
	var missing []int
	for i, p := range paths {
		sum := sha256.Sum256([]byte(imageID + "\x00" + p))
		name := filepath.Join(c.dir, filepath.Base(p)+"-"+hex.EncodeToString(sum[:12]))
		st, err := os.Stat(name)
		if err != nil {
			out[i] = name
			missing = append(missing, i)
			continue
		}
		if now := time.Now(); now.Sub(st.ModTime()) > time.Hour {
			_ = os.Chtimes(name, now, now) // in use: not stale
		}
		if st.Size() > 0 { // empty: the image's own is readable, or missing
			out[i] = name
		}
	}
	if len(missing) == 0 {
		return out, nil
	}
	if err := os.MkdirAll(c.dir, 0o711); err != nil {
		return nil, err
	}
	id, remove, err := r.copySource(ctx, imageID)
	if err != nil {
		return nil, err
	}
	defer remove()
	for _, i := range missing {
		copied, err := r.copyOut(ctx, id, paths[i], out[i])
		if err != nil {
			return nil, err
		}
		if !copied {
			out[i] = ""
		}
	}
	c.removeStale(out)
	return out, nil
}

// removeStale removes the copies in dir, but keep, that no sandbox has
// used for copyMaxAge (an image replaced by a new build).
func (c *readableCopies) removeStale(keep []string) {
	ents, err := os.ReadDir(c.dir)
	if err != nil {
		return
	}
	before := time.Now().Add(-copyMaxAge)
	for _, e := range ents {
		p := filepath.Join(c.dir, e.Name())
		if info, err := e.Info(); err == nil && !slices.Contains(keep, p) && info.Mode().IsRegular() && info.ModTime().Before(before) {
			_ = os.Remove(p)
		}
	}
}

// copySource creates (never starts) a container of image to copy from;
// remove removes it.
func (r *Runtime) copySource(ctx context.Context, image string) (id string, remove func(), err error) {
	name := "agentbox-copy-" + randHex(6)
	r.tracked.add(name) // the reaper's to spare
	cctx, cancel := r.call(ctx)
	created, err := r.cli.ContainerCreate(cctx, &container.Config{Image: image, Entrypoint: []string{"true"},
		Labels: map[string]string{sandbox.LabelProduct: ProductLabelValue, sandbox.LabelInstance: r.opts.Instance, LabelRun: r.run}},
		&container.HostConfig{NetworkMode: "none", LogConfig: container.LogConfig{Type: "none"}}, nil, nil, name)
	cancel()
	if err != nil {
		_ = r.remove(ctx, name)
		r.tracked.drop(name)
		return "", nil, r.engineErr(ctx, "create (copy)", err)
	}
	return created.ID, func() {
		if r.remove(ctx, created.ID) == nil {
			r.tracked.drop(name)
		}
	}, nil
}

// copyOut writes the program at p in container id to dst (0755), or an
// empty dst when the image has none there or others may read it already
// (copied false).
func (r *Runtime) copyOut(ctx context.Context, id, p, dst string) (copied bool, err error) {
	// A whole-file copy can take longer than one call's timeout.
	xctx, cancel := context.WithTimeout(ctx, 10*r.opts.CallTimeout)
	defer cancel()
	var body io.Reader
	rc, _, err := r.cli.CopyFromContainer(xctx, id, p)
	switch {
	case cerrdefs.IsNotFound(err):
	case err != nil:
		return false, r.engineErr(ctx, "copy "+p, err)
	default:
		defer rc.Close()
		tr := tar.NewReader(rc)
		hdr, err := tr.Next()
		if err != nil {
			return false, fmt.Errorf("copy %s: %w", p, err)
		}
		if hdr.Typeflag == tar.TypeReg && hdr.FileInfo().Mode().Perm()&0o004 == 0 {
			body = tr
		}
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".copy-*")
	if err != nil {
		return false, err
	}
	defer os.Remove(tmp.Name())
	if body != nil {
		_, err = io.Copy(tmp, body)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o755)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), dst)
	}
	return body != nil && err == nil, err
}

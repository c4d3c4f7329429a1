package docker

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"

	"github.com/agentbox/agentbox/sandbox"
)

// DefaultGVisorReadable are the image's execute-only programs a gVisor
// sandbox gets readable copies of: the Claude Code CLI (0711 in the
// sandbox images, so that under runc the kernel keeps the agent's
// processes out of its /proc/PID/fd).
var DefaultGVisorReadable = []string{"/usr/local/bin/claude"}

// readableCopies makes readable copies of an image's execute-only
// programs for gVisor sandboxes. gVisor's kernel reads a program itself,
// with the rights of the process that runs it, so it cannot run one its
// user may not read (gvisor.dev/issue/160); a sandbox on gVisor runs the
// copy, bind-mounted read-only over the original. Copies are made once
// per image and program, in dir, and kept while in use.
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
	var out []sandbox.Mount
	for _, p := range paths {
		src, err := r.readable.get(ctx, r, ins.ID, p)
		if err != nil {
			return nil, fmt.Errorf("docker create: a readable copy of %s for gVisor: %w", p, err)
		}
		if src != "" {
			out = append(out, sandbox.Mount{Source: src, Target: p})
		}
	}
	return out, nil
}

// get returns the copy of image's program at p ("" when the image has
// none there, or its user may already read it), making it when missing.
func (c *readableCopies) get(ctx context.Context, r *Runtime, imageID, p string) (string, error) {
	sum := sha256.Sum256([]byte(imageID + "\x00" + p))
	key := hex.EncodeToString(sum[:12])
	name := filepath.Join(c.dir, filepath.Base(p)+"-"+key)
	c.mu.Lock()
	m, ok := c.keys[key]
	if !ok {
		m = &sync.Mutex{}
		c.keys[key] = m
	}
	c.mu.Unlock()
	m.Lock()
	defer m.Unlock()
	if st, err := os.Stat(name); err == nil {
		if now := time.Now(); now.Sub(st.ModTime()) > time.Hour {
			_ = os.Chtimes(name, now, now) // in use: not stale
		}
		if st.Size() == 0 {
			return "", nil // the image's own is readable, or missing
		}
		return name, nil
	}
	if err := os.MkdirAll(c.dir, 0o711); err != nil {
		return "", err
	}
	body, readable, err := r.extract(ctx, imageID, p)
	if err != nil {
		return "", err
	}
	if body != nil {
		defer body.Close()
	}
	tmp, err := os.CreateTemp(c.dir, ".copy-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	// An empty file records that nothing needs copying.
	if body != nil && !readable {
		_, err = io.Copy(tmp, body)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o755)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), name)
	}
	if err != nil {
		return "", err
	}
	c.removeStale(name)
	if body == nil || readable {
		return "", nil
	}
	return name, nil
}

// removeStale removes the copies of dir, but keep, that no sandbox has
// used for copyMaxAge (an image replaced by a new build).
func (c *readableCopies) removeStale(keep string) {
	ents, err := os.ReadDir(c.dir)
	if err != nil {
		return
	}
	before := time.Now().Add(-copyMaxAge)
	for _, e := range ents {
		p := filepath.Join(c.dir, e.Name())
		if info, err := e.Info(); err == nil && p != keep && info.Mode().IsRegular() && info.ModTime().Before(before) {
			_ = os.Remove(p)
		}
	}
}

// extract streams the program at p out of image through a container that
// is created, never started, and removed; readable says whether others
// may read it in the image already. A program missing from the image
// gives a nil body.
func (r *Runtime) extract(ctx context.Context, image, p string) (_ io.ReadCloser, readable bool, err error) {
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
		return nil, false, r.engineErr(ctx, "create (copy)", err)
	}
	remove := func() {
		if r.remove(ctx, created.ID) == nil {
			r.tracked.drop(name)
		}
	}
	// A whole-file copy can take longer than one call's timeout.
	xctx, xcancel := context.WithTimeout(ctx, 10*r.opts.CallTimeout)
	rc, _, err := r.cli.CopyFromContainer(xctx, created.ID, p)
	if err != nil {
		xcancel()
		remove()
		if strings.Contains(strings.ToLower(err.Error()), "no such file") || errors.Is(r.engineErr(ctx, "copy", err), sandbox.ErrNotFound) {
			return nil, false, nil
		}
		return nil, false, r.engineErr(ctx, "copy", err)
	}
	tr := tar.NewReader(rc)
	hdr, err := tr.Next()
	if err != nil || hdr.Typeflag != tar.TypeReg {
		rc.Close()
		xcancel()
		remove()
		if err == nil {
			err = fmt.Errorf("%s is not a regular file in the image", p)
		}
		return nil, false, err
	}
	return &copyStream{Reader: tr, close: func() { rc.Close(); xcancel(); remove() }}, hdr.FileInfo().Mode().Perm()&0o004 != 0, nil
}

// copyStream is a program's content in the engine's tar stream; Close
// ends the stream and removes the container it came from.
type copyStream struct {
	io.Reader
	close func()
}

func (s *copyStream) Close() error { s.close(); return nil }

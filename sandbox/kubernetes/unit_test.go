package kubernetes

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
)

func TestLabelValue(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 64)
	for _, tc := range []struct{ in, want string }{
		{"alice", "alice"},
		{"u-1.x_y", "u-1.x_y"},
		{"", ""},
		{"alice@example.com", "alice_example.com-"},
		{long, strings.Repeat("a", 40) + "-"},
		{"host/123/456/abcd", "host_123_456_abcd-"},
		{"2025-06-01T12:00:00Z", "2025-06-01T12_00_00Z-"},
		{"@@@", "h"},
	} {
		got := LabelValue(tc.in)
		if !strings.HasPrefix(got, tc.want) || (tc.want == tc.in) != (got == tc.in) {
			t.Errorf("LabelValue(%q) = %q, want it to start with %q", tc.in, got, tc.want)
		}
		if msgs := validation.IsValidLabelValue(got); len(msgs) > 0 {
			t.Errorf("LabelValue(%q) = %q is not a label value: %v", tc.in, got, msgs)
		}
	}
	first := LabelValue("x@y")
	if LabelValue("a@b") == LabelValue("a_b@") || LabelValue("x@y") != first {
		t.Error("LabelValue is not deterministic and distinct")
	}
}

func FuzzLabelValue(f *testing.F) {
	for _, s := range []string{"alice", "alice@example.com", strings.Repeat("x", 70), "-a-", "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := LabelValue(s)
		if msgs := validation.IsValidLabelValue(got); len(msgs) > 0 {
			t.Fatalf("LabelValue(%q) = %q: %v", s, got, msgs)
		}
		if len(validation.IsValidLabelValue(s)) == 0 && got != s {
			t.Fatalf("a valid value %q changed to %q", s, got)
		}
	})
}

// TestExecWrapper runs the wrapper with this host's /bin/sh and env(1) on
// preambles of awkward commands: what the command sees must be exactly
// what was asked, and stdin must start right after the preamble.
func TestExecWrapper(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cases := []struct {
		name  string
		env   []string
		argv  []string
		stdin string
		want  string
	}{
		{"argv kept apart", nil, []string{"printf", "[%s]", "a b", "$HOME", "", "x\ny", "'q'"}, "", "[a b][$HOME][][x\ny]['q']"},
		{"env with newlines and =", []string{"A=1\n2\n", "B==x", "C="}, []string{"sh", "-c", `printf '%s|%s|%s' "$A" "$B" "$C"`}, "", "1\n2\n|=x|"},
		{"stdin after the preamble", nil, []string{"cat"}, "line 1\n.\nA 1\nrest", "line 1\n.\nA 1\nrest"},
		{"program name with =", nil, []string{"./a=b"}, "", "ran a=b\n"},
		{"working directory", nil, []string{"pwd"}, "", dir + "\n"},
		{"program name starting with -", nil, []string{"-dash"}, "", "ran -dash\n"},
		{"the API server's address is not passed on", []string{"KUBERNETES_SERVICE_HOST=x"}, []string{"sh", "-c", "echo ${KUBERNETES_SERVICE_HOST:-none}"}, "", "x\n"},
	}
	for _, prog := range []string{"a=b", "-dash"} {
		if err := os.WriteFile(filepath.Join(dir, prog), []byte("#!/bin/sh\necho ran "+prog+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pidfile := filepath.Join(t.TempDir(), "pid")
			in := preamble(pidfile, dir, tc.env, tc.argv, tc.stdin != "")
			cmd := exec.Command("/bin/sh", "-c", execWrapper)
			cmd.Stdin = strings.NewReader(string(in) + tc.stdin)
			cmd.Env = []string{"PATH=/usr/bin:/bin:" + dir, "KUBERNETES_SERVICE_HOST=10.96.0.1", "KUBERNETES_PORT=tcp://10.96.0.1:443"}
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			if err := cmd.Run(); err != nil {
				t.Fatalf("%v (stderr %q)", err, errb.String())
			}
			if out.String() != tc.want {
				t.Errorf("stdout = %q, want %q (stderr %q)", out.String(), tc.want, errb.String())
			}
			if b, err := os.ReadFile(pidfile); err != nil || len(bytes.TrimSpace(b)) == 0 {
				t.Errorf("pid file: %q, %v", b, err)
			}
		})
	}
	// Inherited KUBERNETES_ variables are dropped.
	cmd := exec.Command("/bin/sh", "-c", execWrapper)
	cmd.Stdin = bytes.NewReader(preamble(filepath.Join(dir, "pid"), dir, nil, []string{"env"}, false))
	cmd.Env = []string{"PATH=/usr/bin:/bin", "KUBERNETES_SERVICE_HOST=10.96.0.1", "KUBERNETES_PORT=tcp://10.96.0.1:443", "KEEP=1"}
	out, err := cmd.Output()
	if err != nil || strings.Contains(string(out), "KUBERNETES_") || !strings.Contains(string(out), "KEEP=1") {
		t.Errorf("env = %q, %v; want KEEP and no KUBERNETES_ variable", out, err)
	}
}

func TestOptionsChecked(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		o    Options
		want string
	}{
		{"namespace", Options{Namespace: "Not_A_Name"}, "namespace"},
		{"pull policy", Options{ImagePullPolicy: "Sometimes"}, "image pull policy"},
		{"network", Options{Network: "bridge"}, "network"},
		{"host network not allowed", Options{Network: sandbox.NetworkHost}, "AllowHostNetwork"},
		{"claim root", Options{Storage: Storage{Claim: "data"}}, "claim_root"},
		{"claim root without claim", Options{Storage: Storage{ClaimRoot: "/data"}}, "without a claim"},
		{"negative", Options{MemoryBytes: -1}, "negative"},
		{"relative home", Options{Home: "home"}, "home"},
		{"runtime class", Options{RuntimeClasses: map[string]string{sandbox.IsolationGVisor: "Bad Class"}}, "runtime class"},
		{"runtime class of no isolation", Options{RuntimeClasses: map[string]string{"vm": "kata"}}, "isolation \"vm\""},
	} {
		_, err := New(context.Background(), tc.o)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want one about %s", tc.name, err, tc.want)
		}
	}
}

// TestClaimVolumes: with claim storage the workspace and the mounts under
// the claim's root are subPaths of the claim; other mounts and sockets
// are refused with the reason.
func TestClaimVolumes(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	wss, err := sandbox.NewWorkspaces(filepath.Join(root, "data"), -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	ws, release, err := wss.Acquire(context.Background(), "u1", "c1")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	bin := filepath.Join(root, "bin", "agentbox")
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, []byte("x"), 0o755); err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	sock := filepath.Join(root, "s.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	r := &Runtime{opts: Options{TmpfsBytes: 1 << 20, Home: DefaultHome, Storage: Storage{Claim: "agentbox-data", ClaimRoot: root}}}
	spec := sandbox.Spec{Workspace: ws}
	hidden := []sandbox.Hidden{{Target: sandbox.Workdir + "/.gemini", Folder: true}, {Target: sandbox.Workdir + "/opencode.json"}}
	vols, vms, err := r.volumes(spec, hidden, []sandbox.Mount{{Source: bin, Target: "/usr/local/bin/agentbox"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	// A hidden folder: an empty emptyDir, mounted read-only over it.
	shown := false
	for _, m := range vms {
		if m.MountPath == sandbox.Workdir+"/.gemini" {
			for _, v := range vols {
				shown = shown || v.Name == m.Name && m.ReadOnly && m.SubPath == "" && v.EmptyDir != nil
			}
		}
	}
	if !shown {
		t.Errorf("no read-only empty folder over the hidden .gemini: %+v", vms)
	}
	// A hidden file: the empty file of the downward API volume.
	shown = false
	for _, m := range vms {
		if m.MountPath == sandbox.Workdir+"/opencode.json" {
			for _, v := range vols {
				shown = shown || v.Name == m.Name && m.ReadOnly && m.SubPath == "empty" && v.DownwardAPI != nil &&
					v.DownwardAPI.Items[0].FieldRef.FieldPath == "metadata.annotations['dev.agentbox.empty']"
			}
		}
	}
	if !shown {
		t.Errorf("no read-only empty file over the hidden opencode.json: %+v %+v", vms, vols)
	}
	var claim *corev1.Volume
	for i := range vols {
		if vols[i].PersistentVolumeClaim != nil {
			claim = &vols[i]
		}
		if vols[i].HostPath != nil {
			t.Errorf("claim storage mounts a hostPath: %+v", vols[i])
		}
	}
	if claim == nil || claim.PersistentVolumeClaim.ClaimName != "agentbox-data" {
		t.Fatalf("volumes = %+v, want the claim", vols)
	}
	subs := map[string]string{}
	for _, m := range vms {
		if m.Name == claim.Name {
			subs[m.MountPath] = m.SubPath
		}
	}
	if subs[sandbox.Workdir] != "data/workspaces/u1/c1" || subs["/usr/local/bin/agentbox"] != "bin/agentbox" {
		t.Errorf("subPaths = %v", subs)
	}
	for _, tc := range []struct {
		name  string
		mount sandbox.Mount
		want  string
	}{
		{"outside the claim", sandbox.Mount{Source: outside, Target: "/opt/x"}, "not under claim_root"},
		{"a socket", sandbox.Mount{Source: sock, Target: "/run/s.sock", Writable: true}, "Unix socket"},
	} {
		if _, _, err := r.volumes(spec, nil, []sandbox.Mount{tc.mount}, ""); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "cannot be honoured") {
			t.Errorf("%s: err = %v, want one saying it cannot be honoured (%s)", tc.name, err, tc.want)
		}
	}
	other := &Runtime{opts: Options{TmpfsBytes: 1 << 20, Home: DefaultHome, Storage: Storage{Claim: "c", ClaimRoot: outside}}}
	if _, _, err := other.volumes(spec, nil, nil, ""); err == nil || !strings.Contains(err.Error(), "workspace") {
		t.Errorf("a workspace outside the claim: err = %v", err)
	}
}

// TestClaimRefusesMountedWorkspace: a workspace that is a loop-mounted
// disk image on this host cannot be given to pods through a claim, and the
// error says so.
func TestClaimRefusesMountedWorkspace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	root := t.TempDir()
	if mode, why := sandbox.DetectDiskMode(ctx, root); mode != sandbox.DiskLoop {
		testenv.Missing(t, "loop-mounted workspace disks ("+why+")")
	}
	wss, err := sandbox.NewWorkspacesWith(root, sandbox.WorkspacesOptions{UID: -1, GID: -1, Disk: sandbox.DiskLoop})
	if err != nil {
		t.Fatal(err)
	}
	ws, release, err := wss.AcquireWith(ctx, "u1", "c1", sandbox.AcquireOptions{MaxDisk: 48 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	r := &Runtime{opts: Options{TmpfsBytes: 1 << 20, Home: DefaultHome, Storage: Storage{Claim: "data", ClaimRoot: root}}}
	if _, _, err := r.volumes(sandbox.Spec{Workspace: ws}, nil, nil, ""); err == nil || !strings.Contains(err.Error(), "is a mount on this host") {
		t.Errorf("err = %v, want the mounted workspace refused", err)
	}
}

package jsapi

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/sandbox"
)

// yaoV2Hook uses every ctx.workspace and ctx.computer member the way Yao's
// sandbox v2 hooks do (guarded by `if (ctx.computer)`, results in Yao's
// shapes) and reports what it saw.
const yaoV2Hook = `
export function test(ctx: any, args: any) {
  const r: Record<string, any> = { has_computer: !!ctx.computer, has_workspace: !!ctx.workspace };
  if (!ctx.computer || !ctx.workspace) return r;
  const ws = ctx.workspace;
  r.id_is_sandbox = ctx.computer.id === args.id;
  const info = ctx.computer.Info();
  r.info = { kind: info.kind, node_id: info.node_id, status: info.status, os: info.system.os,
    shell: info.system.shell, box_is_id: info.box_id === args.id, image: info.image, policy: info.policy,
    cpus: info.system.num_cpu > 0, arch: typeof info.system.arch, hostname: typeof info.system.hostname };
  const ok = ctx.computer.Exec(["echo", "jsapi-v2-test"]);
  r.exec = { stdout: ok.stdout.trim(), stderr: ok.stderr, exit_code: ok.exit_code, keys: Object.keys(ok).sort() };
  const bad = ctx.computer.Exec(["sh", "-c", "echo out; echo err >&2; exit 3"]);
  r.exec_fail = { stdout: bad.stdout, stderr: bad.stderr, exit_code: bad.exit_code };
  r.exec_string = ctx.computer.Exec("echo  split   into fields").stdout;
  r.exec_shell = ctx.computer.Exec("echo $((6*7))", { shell: true }).stdout;
  r.exec_cwd = ctx.computer.Exec(["pwd"], { cwd: "sub/dir" }).stdout.trim();

  ws.WriteFile("jsapi-test.txt", "hello from jsapi v2");
  r.read = ws.ReadFile("jsapi-test.txt");
  ws.MkdirAll("sub/dir");
  ws.WriteFile("sub/dir/nested.txt", "nested content");
  r.exists = [ws.Exists("sub/dir/nested.txt"), ws.Exists("sub/none")];
  r.readdir = ws.ReadDir(".").map((e: any) => [e.name, e.is_dir, e.size === undefined ? -1 : (e.is_dir ? 0 : e.size)]);
  r.readdir_default = ws.ReadDir().length;
  const st = ws.Stat("jsapi-test.txt");
  r.stat = { name: st.name, size: st.size, is_dir: st.is_dir, mode: (st.mode & 0o777).toString(8), mtime: st.mtime > 1e12 };
  ws.Copy("jsapi-test.txt", "jsapi-test-copy.txt");
  ws.Copy("sub", "sub-copy");
  r.copy = [ws.ReadFile("jsapi-test-copy.txt"), ws.ReadFile("sub-copy/dir/nested.txt")];
  ws.Rename("jsapi-test-copy.txt", "moved/renamed.txt");
  r.rename = [ws.Exists("moved/renamed.txt"), ws.Exists("jsapi-test-copy.txt")];
  ws.Remove("moved/renamed.txt");
  r.remove = ws.Exists("moved/renamed.txt");
  ws.RemoveAll("sub-copy");
  r.remove_all = ws.Exists("sub-copy");
  r.seen_by_computer = ctx.computer.Exec(["cat", "/workspace/sub/dir/nested.txt"]).stdout;
  return r;
}`

func wantYaoV2() map[string]any {
	return map[string]any{
		"has_computer": true, "has_workspace": true, "id_is_sandbox": true,
		"info": map[string]any{"kind": "box", "node_id": "docker", "status": "online", "os": "linux", "shell": "sh",
			"box_is_id": true, "image": "img", "policy": "oneshot", "cpus": true, "arch": "string", "hostname": "string"},
		"exec":             map[string]any{"stdout": "jsapi-v2-test", "stderr": "", "exit_code": float64(0), "keys": []any{"exit_code", "stderr", "stdout"}},
		"exec_fail":        map[string]any{"stdout": "out\n", "stderr": "err\n", "exit_code": float64(3)},
		"exec_string":      "split into fields\n",
		"exec_shell":       "42\n",
		"exec_cwd":         "/workspace/sub/dir",
		"read":             "hello from jsapi v2",
		"exists":           []any{true, false},
		"readdir":          []any{[]any{"jsapi-test.txt", false, float64(19)}, []any{"sub", true, float64(0)}},
		"readdir_default":  float64(2),
		"stat":             map[string]any{"name": "jsapi-test.txt", "size": float64(19), "is_dir": false, "mode": "644", "mtime": true},
		"copy":             []any{"hello from jsapi v2", "nested content"},
		"rename":           []any{true, false},
		"remove":           false,
		"remove_all":       false,
		"seen_by_computer": "nested content",
	}
}

// TestWorkspaceComputer runs a Yao v2 hook against the shared fake
// sandbox and, where Docker is, a real one: the same shapes on both.
func TestWorkspaceComputer(t *testing.T) {
	t.Parallel()
	sandboxes := map[string]func(t *testing.T) sandbox.Sandbox{
		"fake":   func(t *testing.T) sandbox.Sandbox { return newFakeSandbox(t) },
		"docker": func(t *testing.T) sandbox.Sandbox { return dockerSandbox(t) },
	}
	for name, mk := range sandboxes {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			sb := mk(t)
			hc := &Context{Sandbox: sb, Computer: ComputerInfo{Runtime: "docker", Image: "img", Policy: "oneshot"}}
			got := run(t, yaoV2Hook, hc, map[string]any{"id": sb.ID()})
			want := wantYaoV2()
			if name == "fake" {
				// The fake runs on the host, in the workspace folder.
				got.(map[string]any)["exec_cwd"] = strings.Replace(got.(map[string]any)["exec_cwd"].(string), sb.Workspace().Dir(), sandbox.Workdir, 1)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("got  %v\nwant %v", got, want)
			}
		})
	}
}

func TestWorkspaceComputerErrors(t *testing.T) {
	t.Parallel()
	sb := newFakeSandbox(t)
	outside := outsideLink(t, sb)
	if err := sb.ws.WriteFile(context.Background(), "dir/f", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		stmt, code, name, msg string
	}{
		{`ctx.workspace.ReadFile("../etc/passwd")`, CodePathOutside, "SandboxError", "outside the workspace"},
		{`ctx.workspace.ReadFile("link/secret")`, CodePathOutside, "SandboxError", "outside the workspace"},
		{`ctx.workspace.Exists("link/secret")`, CodePathOutside, "SandboxError", "outside the workspace"},
		{`ctx.workspace.Exists("/etc/passwd")`, CodePathOutside, "SandboxError", "outside the workspace"},
		{`ctx.workspace.Stat("link/secret")`, CodePathOutside, "SandboxError", "outside the workspace"},
		{`ctx.workspace.Copy("link/secret", "stolen")`, CodePathOutside, "SandboxError", "outside the workspace"},
		{`ctx.workspace.Copy("dir/f", "link/planted")`, CodePathOutside, "SandboxError", "outside the workspace"},
		{`ctx.workspace.Rename("dir/f", "../f")`, CodePathOutside, "SandboxError", "outside the workspace"},
		{`ctx.workspace.Rename("dir", "dir/inner")`, CodeIO, "SandboxError", "into itself"},
		{`ctx.workspace.Remove("dir")`, CodeIO, "SandboxError", "not empty"},
		{`ctx.workspace.Remove("gone")`, CodeNotFound, "NotFoundError", "not found"},
		{`ctx.workspace.MkdirAll("dir/f")`, CodeIO, "SandboxError", "is not a folder"},
		{`ctx.workspace.RemoveAll("/workspace")`, CodeIO, "SandboxError", "workspace root"},
		{`ctx.workspace.ReadDir(5)`, CodeInvalidArgument, "TypeError", "workspace.ReadDir: want a path string"},
		{`ctx.workspace.Rename("dir/f")`, CodeInvalidArgument, "TypeError", "workspace.Rename: want a path string, got undefined"},
		{`ctx.workspace.WriteFile("a", 5)`, CodeInvalidArgument, "TypeError", "want content as a string"},
		{`ctx.computer.Exec([])`, CodeInvalidArgument, "TypeError", "computer.Exec: argv is empty"},
		{`ctx.computer.Exec("   ")`, CodeInvalidArgument, "TypeError", "computer.Exec: argv is empty"},
		{`ctx.computer.Exec(["ls"], {cwd: "../x"})`, CodePathOutside, "SandboxError", "computer.Exec: cwd"},
		{`ctx.computer.Exec(["ls"], {bogus: 1})`, CodeInvalidArgument, "TypeError", `computer.Exec: unknown option "bogus"`},
		{`ctx.computer.Exec({})`, CodeInvalidArgument, "TypeError", "computer.Exec: want argv"},
		{`ctx.computer.VNC()`, CodeNoDesktop, "SandboxError", "computer.VNC: this sandbox has no desktop"},
		{`ctx.computer.Proxy(3000)`, CodeSandboxUnavailable, "SandboxError", "serves no previews of sandbox ports"},
		{`ctx.computer.Screenshot()`, CodeNoDesktop, "SandboxError", "this sandbox has no desktop (set sandbox.desktop"},
	}
	for _, tc := range cases {
		t.Run(tc.stmt, func(t *testing.T) {
			t.Parallel()
			got := run(t, catchJS(tc.stmt), &Context{Sandbox: sb}, nil).(map[string]any)
			if got["code"] != tc.code || got["name"] != tc.name || got["instance"] != true || !strings.Contains(got["message"].(string), tc.msg) {
				t.Fatalf("got %v, want %s %s %q", got, tc.code, tc.name, tc.msg)
			}
			if strings.Contains(got["message"].(string), sb.dir) {
				t.Fatalf("message %q reveals the host path", got["message"])
			}
		})
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 1 {
		t.Fatalf("the outside folder changed: %v", entries)
	}
}

// TestNoSandboxMembers: a direct assistant's hooks see no workspace or
// computer (Yao hooks test for them), and using one anyway names it.
func TestNoSandboxMembers(t *testing.T) {
	t.Parallel()
	hc := &Context{AssistantID: "chatty"}
	got := run(t, yaoV2Hook, hc, map[string]any{})
	if want := map[string]any{"has_computer": false, "has_workspace": false}; !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for stmt, member := range map[string]string{
		`ctx.computer.Info()`:         "ctx.computer is undefined",
		`ctx.workspace.ReadDir(".")`:  "ctx.workspace is undefined",
		`ctx.workspace.ReadFile("a")`: "ctx.sandbox or ctx.workspace is undefined",
		`ctx.sandbox.Exec(["ls"])`:    "ctx.computer or ctx.sandbox is undefined",
	} {
		h := load(t, `export function test(ctx: any) { `+stmt+` }`)
		_, err := h.Call(context.Background(), hc, "test", nil)
		if err == nil || !strings.Contains(err.Error(), member) || !strings.Contains(err.Error(), `assistant "chatty" has no sandbox`) {
			t.Errorf("%s: %v, want it to say %q", stmt, err, member)
		}
	}
}

// TestComputerVNC: VNC() is the desktop port's preview URL on noVNC's
// page.
func TestComputerVNC(t *testing.T) {
	t.Parallel()
	var asked string
	hc := &Context{Sandbox: newFakeSandbox(t), Computer: ComputerInfo{Desktop: true, Preview: func(port int, path string) (string, error) {
		asked = fmt.Sprintf("%d %s", port, path)
		return "http://tok.preview.localhost:8080" + path, nil
	}}}
	got := run(t, `function test(ctx) { return ctx.computer.VNC(); }`, hc, nil)
	if asked != "6080 /vnc.html?autoconnect=1&resize=scale&reconnect=1&path=websockify" || !strings.HasPrefix(got.(string), "http://tok.preview.localhost:8080/vnc.html?") {
		t.Fatalf("asked %q, got %v", asked, got)
	}
}

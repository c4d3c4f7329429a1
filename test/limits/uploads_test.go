package limits

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/e2etest"
)

// upload PUTs size bytes to path of chatID as token's user; chunked sends
// the body without a Content-Length.
func (s *server) upload(t testing.TB, token, chatID, path string, size int, chunked bool) (int, string) {
	t.Helper()
	var body io.Reader = bytes.NewReader(bytes.Repeat([]byte("u"), size))
	if chunked {
		body = io.MultiReader(body) // not a *bytes.Reader: no length
	}
	return s.Send(t, http.MethodPut, "/api/chats/"+chatID+"/files?path="+path, token, "", body)
}

// uploadApp is the example app with 64 MiB workspaces and limits (a JSON
// object's fields) in app.jsonc.
func uploadApp(t *testing.T, limits string) string {
	t.Helper()
	app := newApp(t, "", "")
	e2etest.Write(t, filepath.Join(app, "app.jsonc"), `{"data_root": "./data", `+e2etest.AuthJSONC+`,
		"sandbox": {"runtime": "docker", "max_disk": "64m"}, "limits": {`+limits+`}}`)
	return app
}

// loopMode reports whether the server limits workspaces with disk images
// (root with loop devices), as it says in its log.
func (s *server) loopMode() bool {
	return !strings.Contains(s.Logs.String(), "workspace disk limits are watched")
}

const mib = 1 << 20

// TestUploadQuotas is the upload half of issue 26's "one user filled the
// data root with 2.4 GB in seconds": an upload to a new chat makes the
// workspace a turn would (a disk image of sandbox.max_disk), within the
// user's bounds on workspaces and bytes; a file that does not fit is
// refused (before a byte is read when its size is known, cut off when it
// is not) and leaves nothing; another user is not affected.
func TestUploadQuotas(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: integration test")
	}
	t.Parallel()
	app := uploadApp(t, `"workspaces_per_user": 3, "disk_per_user": "100m"`)
	s := start(t, app, "")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	prefix := e2etest.NewID("up")
	chat := func(i int) string { return fmt.Sprintf("%s-%d", prefix, i) }
	root := filepath.Join(app, "data", "workspaces")

	for i := 1; i <= 3; i++ {
		if code, body := s.upload(t, e2etest.TokenAlice, chat(i), "seed.bin", mib, false); code != 201 {
			t.Fatalf("upload to a new chat %d: %d %s", i, code, body)
		}
		if _, err := os.Stat(filepath.Join(root, "alice", "."+chat(i)+".disk")); s.loopMode() && err != nil {
			t.Errorf("chat %d's workspace is not a disk image as a turn's would be: %v", i, err)
		}
	}
	// A fourth workspace, by upload or by turn, is past workspaces_per_user.
	if code, body := s.upload(t, e2etest.TokenAlice, chat(4), "seed.bin", mib, false); code != 507 ||
		!strings.Contains(body, `"code":"quota_exceeded"`) || !strings.Contains(body, "limits.workspaces_per_user") {
		t.Errorf("upload to a fourth chat: %d %s", code, body)
	}
	if _, err := os.Stat(filepath.Join(root, "alice", chat(4))); !os.IsNotExist(err) {
		t.Errorf("the refused upload made a workspace: %v", err)
	}
	// (The stream started before the turn made its workspace: the error
	// is its end.)
	if r := s.Chat(ctx, e2etest.TokenAlice, "coder", chat(5), "Say hi."); r.Final() == nil || r.Final().Error != "quota_exceeded" || !strings.Contains(fmt.Sprint(r.Events), "limits.workspaces_per_user") {
		t.Errorf("a turn in a fifth chat: %d %s %+v", r.Status, r.Body, r.Events)
	}

	// 40 MiB fits in a 64 MiB workspace once, not twice.
	if code, body := s.upload(t, e2etest.TokenAlice, chat(1), "big.bin", 40*mib, false); code != 201 {
		t.Fatalf("40 MiB: %d %s", code, body)
	}
	for _, chunked := range []bool{false, true} {
		code, body := s.upload(t, e2etest.TokenAlice, chat(1), "more.bin", 30*mib, chunked)
		if code != 507 || !strings.Contains(body, `"code":"quota_exceeded"`) {
			t.Errorf("30 MiB more (chunked %v): %d %s", chunked, code, body)
		}
		if !chunked && !strings.Contains(body, "does not fit in the chat's workspace") {
			t.Errorf("30 MiB more: %s", body)
		}
	}
	// The user's 100 MiB: 1+1+1+40 MiB, then 40 more in a second chat,
	// then a third 40 is refused.
	if code, body := s.upload(t, e2etest.TokenAlice, chat(2), "big.bin", 40*mib, true); code != 201 {
		t.Fatalf("40 MiB in chat 2: %d %s", code, body)
	}
	if code, body := s.upload(t, e2etest.TokenAlice, chat(3), "big.bin", 40*mib, false); code != 507 || !strings.Contains(body, "limits.disk_per_user") {
		t.Errorf("past disk_per_user: %d %s", code, body)
	}
	if code, body := s.upload(t, e2etest.TokenAlice, chat(3), "big.bin", 40*mib, true); code != 507 || !strings.Contains(body, "limits.disk_per_user") {
		t.Errorf("past disk_per_user, chunked: %d %s", code, body)
	}
	// Nothing of the refused files is left, temporary files included.
	for i := 1; i <= 3; i++ {
		_, listing := s.get(t, "/api/chats/"+chat(i)+"/files?path=.", e2etest.TokenAlice)
		if strings.Contains(listing, "more.bin") || strings.Contains(listing, ".tmp-") || (i == 3 && strings.Contains(listing, "big.bin")) {
			t.Errorf("chat %d keeps a refused file: %s", i, listing)
		}
	}
	// Bob has bounds of his own.
	if code, body := s.upload(t, e2etest.TokenBob, chat(9), "seed.bin", mib, false); code != 201 {
		t.Errorf("bob's upload: %d %s", code, body)
	}
	_, metrics := s.get(t, "/metrics", e2etest.TokenOperator)
	if !strings.Contains(metrics, `agentbox_limit_rejections_total{limit="workspaces_per_user"} 2`) || !strings.Contains(metrics, `agentbox_limit_rejections_total{limit="disk_per_user"} 2`) {
		t.Errorf("metrics:\n%s", grepLines(metrics, "agentbox_limit_rejections_total"))
	}
}

// rss reads a process's resident memory and its peak, in bytes.
func rss(t testing.TB, pid int) (now, peak int64) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			now = kb << 10
		case "VmHWM:":
			peak = kb << 10
		}
	}
	return now, peak
}

// TestUploadMemory is issue 26's "24 parallel uploads took the server
// from 2 MB to 2.75 GB": uploads stream to disk, so 24 uploads of 16 MiB
// sent at once (384 MiB) raise the server's peak resident memory by a
// small bound, not by what they carry.
func TestUploadMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: integration test")
	}
	t.Parallel()
	s := start(t, uploadApp(t, `"uploads_per_user": 24, "disk_per_user": "2g"`), "")
	pid := s.Cmd.Process.Pid
	// Warm the upload path once, so the baseline has what every upload
	// path needs anyway.
	prefix := e2etest.NewID("mem")
	if code, body := s.upload(t, e2etest.TokenAlice, prefix+"-warm", "f.bin", mib, false); code != 201 {
		t.Fatalf("warm-up: %d %s", code, body)
	}
	// Writing 5 to clear_refs resets the peak (VmHWM) to what the process
	// holds now.
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		t.Fatalf("reset the server's peak memory: %v", err)
	}
	base, _ := rss(t, pid)
	const n, size = 24, 16 * mib
	var wg sync.WaitGroup
	codes := make([]int, n)
	for i := range n {
		wg.Go(func() {
			codes[i], _ = s.upload(t, e2etest.TokenAlice, fmt.Sprintf("%s-%d", prefix, i), "f.bin", size, i%2 == 1)
		})
	}
	wg.Wait()
	for i, c := range codes {
		if c != 201 {
			t.Errorf("upload %d: %d", i, c)
		}
	}
	_, peak := rss(t, pid)
	grew := peak - base
	t.Logf("%d uploads of %d MiB at once: server RSS %d MiB before, peak %d MiB (+%d MiB)", n, size/mib, base/mib, peak/mib, grew/mib)
	if grew > 96*mib {
		t.Errorf("the server's peak memory grew by %d MiB for %d MiB of uploads, want under 96 MiB", grew/mib, n*size/mib)
	}
	for i := range n {
		_, body := s.get(t, fmt.Sprintf("/api/chats/%s-%d/files?path=.", prefix, i), e2etest.TokenAlice)
		if !strings.Contains(body, fmt.Sprintf(`"size":%d`, size)) {
			t.Errorf("upload %d: %s", i, body)
		}
	}
}

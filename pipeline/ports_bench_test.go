package pipeline

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/preview"
	"github.com/agentbox/agentbox/scripted"
)

// fileServer is Python's file server answering HTTP/1.1, so that clients
// keep their connections (python3 -m http.server answers HTTP/1.0: one
// connection a request), with TCP_NODELAY (its header and body are two
// writes: Nagle's algorithm would hold the second for the client's
// delayed ACK, 40 ms), quiet, on the port of its argument (0: any; the
// port it took is its first line of output).
const fileServer = `import http.server as h, sys
h.SimpleHTTPRequestHandler.protocol_version = "HTTP/1.1"
h.SimpleHTTPRequestHandler.log_message = lambda *a: None
h.SimpleHTTPRequestHandler.disable_nagle_algorithm = True
s = h.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), h.SimpleHTTPRequestHandler)
print(s.server_address[1], flush=True)
s.serve_forever()
`

// benchFiles writes the served files in the current folder: a small page
// and 16 MiB.
const benchFiles = "printf ok > small.txt && head -c 16777216 /dev/urandom > big.bin"

// BenchmarkPreviewDocker: the preview of a port in a real Docker sandbox
// against a direct loopback connection, the same server on both ends
// (fileServer on Python 3: in the sandbox, started by the agent of a kept
// chat, its Bash call scripted; and on the host). Each iteration makes one
// request each way, alternately, so that the load of a shared machine
// weighs on both alike; the ratio is the preview's time over the
// direct one's (1: nothing added). The preview's path: an HTTP client
// with the preview's cookie, the preview handler (ticket and cookie
// checks, the reverse proxy), the bridge's port relay over its Unix
// socket into the sandbox, the guest's splice to the sandbox's loopback.
func BenchmarkPreviewDocker(b *testing.B) {
	testenv.Docker(b)
	python := testenv.Tool(b, "python3")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	// The host's server, on loopback.
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "serve.py"), []byte(fileServer), 0o644); err != nil {
		b.Fatal(err)
	}
	files := exec.CommandContext(ctx, "sh", "-c", benchFiles)
	files.Dir = dir
	if out, err := files.CombinedOutput(); err != nil {
		b.Fatalf("files: %v %s", err, out)
	}
	host := exec.CommandContext(ctx, python, "serve.py", "0")
	host.Dir = dir
	stdout, err := host.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := host.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = host.Process.Kill(); _ = host.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatalf("host server: %v", err)
	}
	direct := "http://127.0.0.1:" + strings.TrimSpace(line)

	// The sandbox's server, started by the agent of a kept chat.
	pv, err := preview.New(preview.Config{})
	if err != nil {
		b.Fatal(err)
	}
	script := fmt.Sprintf("cd /workspace && cat > serve.py <<'EOF'\n%sEOF\n%s && (nohup python3 serve.py 8000 > serve.log 2>&1 &) && sleep 1 && echo started", fileServer, benchFiles)
	e := newKeptEnv(b, ctx, 5*time.Minute, []scripted.Turn{
		{When: &scripted.Match{Contains: "serve"}, ToolCalls: []scripted.ToolCall{{Name: "Bash", Input: map[string]any{"command": script}}}},
		{When: &scripted.Match{AfterToolResult: "Bash"}, Text: "Serving."},
	}, func(c *Config) { c.Previews = pv })
	e.coder.Sandbox.Ports = []assistant.Port{{Port: 8000}}
	if got, _ := e.turn(b, ctx, "bench", "serve the files"); got != "Serving." {
		b.Fatalf("answer %q", got)
	}
	srv := httptest.NewServer(pv.Handler())
	defer srv.Close()
	base, _ := url.Parse(srv.URL)
	ticketURL := waitListening(b, pv, "bench", base)[0].URL
	previewClient := previewBrowser(srv)
	directClient := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	get := func(c *http.Client, u string) int64 {
		resp, err := c.Get(u)
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("GET %s: %d, %v", u, resp.StatusCode, err)
		}
		return n
	}
	get(previewClient, ticketURL) // the ticket becomes the cookie
	tu, _ := url.Parse(ticketURL)
	origin := tu.Scheme + "://" + tu.Host

	for _, f := range []struct{ name, path string }{{"small", "/small.txt"}, {"16MiB", "/big.bin"}} {
		b.Run(f.name, func(b *testing.B) {
			var dd, pd time.Duration
			var bytes int64
			for b.Loop() {
				t0 := time.Now()
				bytes = get(directClient, direct+f.path)
				t1 := time.Now()
				if n := get(previewClient, origin+f.path); n != bytes {
					b.Fatalf("the preview gave %d bytes, the direct connection %d", n, bytes)
				}
				dd += t1.Sub(t0)
				pd += time.Since(t1)
			}
			n := float64(b.N)
			b.ReportMetric(float64(dd.Microseconds())/n, "direct-µs/op")
			b.ReportMetric(float64(pd.Microseconds())/n, "preview-µs/op")
			b.ReportMetric(float64(pd)/float64(dd), "preview/direct")
			if bytes > 1<<20 {
				b.ReportMetric(float64(bytes)*n/dd.Seconds()/1e6, "direct-MB/s")
				b.ReportMetric(float64(bytes)*n/pd.Seconds()/1e6, "preview-MB/s")
			}
		})
	}
}

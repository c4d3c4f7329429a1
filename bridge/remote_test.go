package bridge

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox/agentbox/bridge/bridgetest"
	"github.com/agentbox/agentbox/bridge/egress/egresstest"
)

const remoteSecret = "Bearer mcp_REMOTEsecret_7d31c9"

// startRemoteRelay runs `agentbox bridge mcp --server name` (GuestMCP) to
// socket between pipes and returns the CLI's ends.
func startRemoteRelay(t *testing.T, socket, name string) (io.ReadCloser, io.WriteCloser, <-chan error) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- GuestMCP(context.Background(), socket, name, inR, outW)
		outW.Close()
	}()
	t.Cleanup(func() { inW.Close() })
	return outR, inW, done
}

// TestRemoteMCPRelay: a remote MCP server is reached by the host with its
// headers (which never reach the sandbox's side), its tool list enforced
// there, and what it answers scrubbed of the headers' values.
func TestRemoteMCPRelay(t *testing.T) {
	t.Parallel()
	for _, transport := range []string{"http", "sse"} {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			calls := &bridgetest.Calls{}
			url := bridgetest.HTTPServer(t, transport, "Authorization="+remoteSecret, calls)
			s := startSession(t, Options{RemoteMCP: true})
			if err := s.SetRemoteMCP(map[string]RemoteMCP{
				"srv": {Transport: transport, URL: url, Header: http.Header{"Authorization": {remoteSecret}}, Tools: []string{"visible", "also_visible"}},
				"all": {Transport: transport, URL: url, Header: http.Header{"Authorization": {remoteSecret}}},
			}); err != nil {
				t.Fatal(err)
			}
			def := s.RemoteMCPServer("srv")
			if def.Command != GuestBinary || strings.Join(def.Args, " ") != "bridge mcp --socket "+GuestRemoteMCPSocket+" --server srv" {
				t.Errorf("the CLI's server: %+v", def)
			}
			mounts := ""
			for _, m := range s.Mounts() {
				mounts += m.Target + " "
			}
			if !strings.Contains(mounts, GuestRemoteMCPSocket) {
				t.Errorf("mounts %s", mounts)
			}
			sock := filepath.Join(s.Dir(), "mcp.sock")

			// The tool list, enforced at the host.
			r, w, done := startRemoteRelay(t, sock, "srv")
			checkToolList(t, r, w, calls.Names)
			if err := <-done; err != nil {
				t.Errorf("relay: %v", err)
			}

			// Without a tool list every tool is there; what the server
			// says of its credential comes back masked. (The SDK shows an
			// SSE server's tools no headers: they answer "headers
			// called".)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			client := mcp.NewClient(&mcp.Implementation{Name: "cli", Version: "1"}, nil)
			r, w, _ = startRemoteRelay(t, sock, "all")
			sess, err := client.Connect(ctx, &mcp.IOTransport{Reader: r, Writer: w}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if list, err := sess.ListTools(ctx, nil); err != nil || len(list.Tools) != len(bridgetest.Tools) {
				t.Errorf("unfiltered tools %+v, %v", list, err)
			}
			res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "headers"})
			if err != nil {
				t.Fatal(err)
			}
			text := res.Content[0].(*mcp.TextContent).Text
			if (transport == "http" && !strings.HasPrefix(text, "Authorization: ****")) || len(egresstest.Leaks(strings.TrimPrefix(remoteSecret, "Bearer "), text)) > 0 {
				t.Errorf("the server's echo of its credential came back as %q", text)
			}
			sess.Close()

			// A server the session does not know: the relay ends, nothing
			// is reached.
			r, w, done = startRemoteRelay(t, sock, "nope")
			if _, err := client.Connect(ctx, &mcp.IOTransport{Reader: r, Writer: w}, nil); err == nil {
				t.Error("connected to an unknown server")
			}
			<-done
		})
	}
}

func TestRemoteMCPNeedsTheRelay(t *testing.T) {
	t.Parallel()
	s := startSession(t, Options{})
	if err := s.SetRemoteMCP(nil); err != nil {
		t.Errorf("no servers for a session without the relay: %v", err)
	}
	if err := s.SetRemoteMCP(map[string]RemoteMCP{"x": {Transport: "http", URL: "https://x"}}); err == nil {
		t.Error("servers for a session without the relay")
	}
	if def := s.RemoteMCPServer("x"); def.Command != "" {
		t.Errorf("relay server without a relay: %+v", def)
	}
	r := startSession(t, Options{RemoteMCP: true})
	if err := r.SetRemoteMCP(map[string]RemoteMCP{"x": {Transport: "ws", URL: "ws://x"}}); err == nil {
		t.Error("a ws server was taken")
	}
}

// TestRemoteMCPThroughGateway: across the network the remote MCP relay is
// a channel of the gateway, reached with the session's credentials.
func TestRemoteMCPThroughGateway(t *testing.T) {
	g := startGateway(t)
	url := bridgetest.HTTPServer(t, "http", "Authorization="+remoteSecret, &bridgetest.Calls{})
	s := startSession(t, Options{RemoteMCP: true, Gateway: g})
	if err := s.SetRemoteMCP(map[string]RemoteMCP{"srv": {Transport: "http", URL: url, Header: http.Header{"Authorization": {remoteSecret}}}}); err != nil {
		t.Fatal(err)
	}
	if m := s.Mounts(); len(m) != 1 {
		t.Fatalf("mounts = %+v, want the binary only", m)
	}
	def := s.RemoteMCPServer("srv")
	if !strings.Contains(strings.Join(def.Args, " "), "--socket "+GatewayPrefix+channelRemoteMCP+" --server srv") {
		t.Fatalf("the CLI's server: %+v", def)
	}
	t.Setenv(EnvCredentials, s.SandboxEnv()[EnvCredentials])
	r, w, done := startRemoteRelay(t, GatewayPrefix+channelRemoteMCP, "srv")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sess, err := mcp.NewClient(&mcp.Implementation{Name: "cli", Version: "1"}, nil).Connect(ctx, &mcp.IOTransport{Reader: r, Writer: w}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "visible"})
	if err != nil || res.Content[0].(*mcp.TextContent).Text != "visible called" {
		t.Fatalf("call: %+v, %v", res, err)
	}
	sess.Close()
	if err := <-done; err != nil {
		t.Errorf("relay: %v", err)
	}
}

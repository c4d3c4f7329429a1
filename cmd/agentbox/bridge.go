package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/agentbox/agentbox/bridge"
)

// bridgeStdin is the stdin of `bridge mcp` and `bridge run` (a variable so
// tests can feed it).
var bridgeStdin io.Reader = os.Stdin

const bridgeUsage = `usage: agentbox bridge SUBCOMMAND [flags]

Runs inside a sandbox and connects it to the host over the per-request
bridge sockets; it holds no keys and needs no network.

subcommands:
  mcp    --socket PATH [--server NAME]
         stdio MCP server for the agent CLI, relaying to the host's tools,
         or with --server to the remote MCP server NAME, which the host
         reaches with its credentials
  mcp-filter --allow TOOL,... -- COMMAND [ARGS...]
         stdio MCP server for the agent CLI in front of one stdio MCP
         server: only the allowed tools are listed and may be called
  run    --socket PATH [--listen 127.0.0.1:PORT] [EGRESS FLAGS] -- COMMAND [ARGS...]
         serve the model proxy on loopback, then run COMMAND with
         ANTHROPIC_BASE_URL pointing at it; exits with COMMAND's status.
         --socket "" serves no model proxy. With --egress-socket PATH
         [--egress-listen 127.0.0.1:PORT] [--egress-ca FILE]
         [--setenv NAME=VALUE ...] it serves the egress proxy too and
         points HTTP(S)_PROXY at it, trusts the CA and sets the variables
  proxy  --socket PATH [--listen 127.0.0.1:PORT]
         serve the model proxy only, until interrupted
  ports  --socket PATH --ports PORT,...
         relay the host's preview connections to these loopback ports
         and report which of them listen, until the host's socket closes
`

func runBridge(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, bridgeUsage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	sub, args := args[0], args[1:]
	// Before anything else: the relays hold the CLI's stdin and stdout.
	if err := bridge.Harden(); err != nil {
		fmt.Fprintf(stderr, "agentbox bridge %s: %v\n", sub, err)
		return 1
	}
	fs := flag.NewFlagSet("agentbox bridge "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, bridgeUsage) }
	socket := fs.String("socket", "", "host socket path inside the sandbox")
	var listen, server *string
	var egress bridge.GuestEgress
	switch sub {
	case "mcp-filter":
		return runMCPFilter(ctx, fs, args, stdout, stderr)
	case "ports":
		return runBridgePorts(ctx, fs, args, stderr)
	case "mcp":
		*socket = bridge.GuestToolsSocket
		server = fs.String("server", "", "the remote MCP server to relay to (its socket is the remote MCP socket)")
	case "run", "proxy":
		*socket = bridge.GuestModelSocket
		listen = fs.String("listen", bridge.GuestProxyAddr, "loopback address for the model proxy")
		if sub == "run" {
			fs.StringVar(&egress.Socket, "egress-socket", "", "host egress socket path inside the sandbox")
			fs.StringVar(&egress.Listen, "egress-listen", bridge.GuestEgressAddr, "loopback address for the egress proxy")
			fs.StringVar(&egress.CA, "egress-ca", "", "CA certificate of the egress proxy to trust")
			fs.Func("setenv", "NAME=VALUE to set for the command (repeatable)", func(v string) error {
				egress.Env = append(egress.Env, v)
				return nil
			})
		}
	default:
		fmt.Fprintf(stderr, "agentbox bridge: unknown subcommand %q\n\n%s", sub, bridgeUsage)
		return 2
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *socket == "" && (sub != "run" || egress.Socket == "" && os.Getenv(bridge.EnvCredentials) == "") {
		fmt.Fprintf(stderr, "agentbox bridge %s: --socket must not be empty\n", sub)
		return 2
	}
	switch sub {
	case "mcp":
		if fs.NArg() > 0 {
			fmt.Fprintf(stderr, "agentbox bridge mcp: unexpected arguments %q\n", fs.Args())
			return 2
		}
		if err := bridge.GuestMCP(ctx, *socket, *server, bridgeStdin, stdout); err != nil {
			fmt.Fprintf(stderr, "agentbox bridge mcp: %v\n", err)
			return 1
		}
		return 0
	case "proxy":
		if fs.NArg() > 0 {
			fmt.Fprintf(stderr, "agentbox bridge proxy: unexpected arguments %q\n", fs.Args())
			return 2
		}
		return runBridgeProxy(ctx, *socket, *listen, stderr)
	default: // run
		// Signals reach the command through GuestRun's own forwarding; the
		// dispatcher's signal context would turn a SIGINT into a second,
		// harsher SIGTERM.
		rc := bridge.RunConfig{
			Socket: *socket,
			Listen: *listen,
			Argv:   fs.Args(),
			Stdin:  bridgeStdin,
			Stdout: stdout,
			Stderr: stderr,
		}
		if egress.Socket != "" {
			rc.Egress = &egress
		} else if egress.CA != "" || len(egress.Env) > 0 {
			fmt.Fprintf(stderr, "agentbox bridge run: --egress-ca and --setenv need --egress-socket\n")
			return 2
		}
		code, err := bridge.GuestRun(context.WithoutCancel(ctx), rc)
		if err != nil {
			fmt.Fprintf(stderr, "agentbox bridge run: %v\n", err)
		}
		return code
	}
}

// runBridgeProxy serves the model proxy until ctx ends.
func runBridgeProxy(ctx context.Context, socket, listen string, stderr io.Writer) int {
	if _, err := os.Stat(socket); err != nil {
		fmt.Fprintf(stderr, "agentbox bridge proxy: model socket: %v\n", err)
		return 1
	}
	ln, err := bridge.ListenLoopback(listen)
	if err != nil {
		fmt.Fprintf(stderr, "agentbox bridge proxy: %v\n", err)
		return 2
	}
	fmt.Fprintf(stderr, "agentbox bridge proxy: listening on http://%s\n", ln.Addr())
	if err := bridge.GuestProxy(ctx, ln, socket); err != nil {
		fmt.Fprintf(stderr, "agentbox bridge proxy: %v\n", err)
		return 1
	}
	return 0
}

// runBridgePorts is `agentbox bridge ports`.
func runBridgePorts(ctx context.Context, fs *flag.FlagSet, args []string, stderr io.Writer) int {
	socket := fs.Lookup("socket").Value
	_ = socket.Set(bridge.GuestPortsSocket)
	list := fs.String("ports", "", "comma-separated loopback ports to relay")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	var ports []int
	for f := range strings.SplitSeq(*list, ",") {
		p, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || p < 1 || p > 65535 {
			fmt.Fprintf(stderr, "agentbox bridge ports: --ports: want ports 1-65535 separated by commas, got %q\n", *list)
			return 2
		}
		ports = append(ports, p)
	}
	if fs.NArg() > 0 || socket.String() == "" {
		fmt.Fprintf(stderr, "agentbox bridge ports: want --socket PATH --ports PORT,... and no arguments\n")
		return 2
	}
	if err := bridge.GuestPorts(ctx, socket.String(), ports); err != nil {
		fmt.Fprintf(stderr, "agentbox bridge ports: %v\n", err)
		return 1
	}
	return 0
}

// runMCPFilter is `agentbox bridge mcp-filter`.
func runMCPFilter(ctx context.Context, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) int {
	allow := fs.String("allow", "", "comma-separated tools of the server the agent may list and call")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	var tools []string
	for _, t := range strings.Split(*allow, ",") {
		if t = strings.TrimSpace(t); t != "" {
			tools = append(tools, t)
		}
	}
	if len(tools) == 0 {
		fmt.Fprintf(stderr, "agentbox bridge mcp-filter: --allow names no tool\n")
		return 2
	}
	err := bridge.GuestFilter(ctx, bridge.FilterConfig{
		Allow: tools, Argv: fs.Args(),
		Stdin: bridgeStdin, Stdout: stdout, Stderr: stderr,
	})
	if err != nil {
		fmt.Fprintf(stderr, "agentbox bridge mcp-filter: %v\n", err)
		return 1
	}
	return 0
}

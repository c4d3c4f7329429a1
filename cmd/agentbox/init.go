package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
)

const initUsage = `usage: agentbox init [DIR]

Writes a minimal app into DIR (default: the current folder): an assistant
"hello" with a prompt, on a scripted model that answers offline. Files that
exist are never overwritten. Then:

  cd DIR && agentbox run hello "Hi"      one turn in the terminal
  agentbox serve                         the chat API and the web app
`

// initFiles are the files of the app init writes, by path.
var initFiles = map[string]string{
	".gitignore": "data/\n",
	"connectors/scripted/hello.conn.yao": `// A scripted model: it answers from hello.yaml, offline. For a real one,
// add connectors/anthropic/sonnet.conn.yao with
// {"type": "anthropic", "options": {"key": "$ENV.ANTHROPIC_API_KEY", "model": "claude-sonnet-4-5"}}
// and set the assistant's connector to "anthropic.sonnet".
{ "type": "scripted", "options": { "script": "hello.yaml", "model": "scripted-hello" } }
`,
	"connectors/scripted/hello.yaml": `# What the scripted model answers, turn by turn.
turns:
  - text: Hello! I answer from a script, offline; point my connector at a real model next.
`,
	"assistants/hello/package.yao": `{
  "name": "Hello",
  "description": "Greets you and says what it can do.",
  "connector": "scripted.hello",
}
`,
	"assistants/hello/prompts.yml": `- role: system
  content: You greet the user in one friendly sentence.
`,
}

func runInit(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fl := newFlags("init", initUsage, stdout, stderr)
	args, code, ok := fl.parse(args)
	if !ok {
		return code
	}
	dir := "."
	switch len(args) {
	case 0:
	case 1:
		dir = args[0]
	default:
		return fl.usageError("want at most one folder, got %d arguments", len(args))
	}
	paths := make([]string, 0, len(initFiles))
	for p := range initFiles {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var exist []string
	for _, p := range paths {
		if _, err := os.Lstat(filepath.Join(dir, p)); err == nil || !errors.Is(err, fs.ErrNotExist) {
			exist = append(exist, p)
		}
	}
	if len(exist) > 0 {
		fmt.Fprintf(stderr, "agentbox init: %s already has %v: nothing written (init writes a new app; pick another folder)\n", dir, exist)
		return 1
	}
	for _, p := range paths {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			fmt.Fprintf(stderr, "agentbox init: %v\n", err)
			return 1
		}
		if err := os.WriteFile(full, []byte(initFiles[p]), 0o644); err != nil {
			fmt.Fprintf(stderr, "agentbox init: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "wrote %s\n", filepath.Join(dir, p))
	}
	cd := ""
	if dir != "." {
		cd = "cd " + shellQuote(dir) + " && "
	}
	fmt.Fprintf(stdout, "next: %sagentbox run hello \"Hi\"   (then agentbox serve for the web app)\n", cd)
	return 0
}

package jsapi

import (
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/dop251/goja"

	"github.com/agentbox/agentbox/sandbox"
)

// MaxReadFile bounds what ctx.sandbox.ReadFile returns, in bytes.
const MaxReadFile = 32 << 20

// sandboxObject builds ctx.sandbox over hc.Sandbox. File operations go
// through its confined Workspace; Exec runs in the sandbox with the hook's
// context, so the hook's deadline bounds it.
func (c *call) sandboxObject() *goja.Object {
	return c.newLazy(sandboxMembers, func(key string) goja.Value {
		switch key {
		case "workdir":
			return c.vm.ToValue(sandbox.Workdir)
		case "ReadFile":
			return c.vm.ToValue(nativeFn(c.readFile))
		case "WriteFile":
			return c.vm.ToValue(nativeFn(c.writeFile))
		case "ListDir":
			return c.vm.ToValue(nativeFn(c.listDir))
		case "Exec":
			return c.vm.ToValue(nativeFn(c.exec))
		}
		return goja.Undefined()
	})
}

func (c *call) workspace(fn string) *sandbox.Workspace {
	ws := c.hc.Sandbox.Workspace()
	if ws == nil {
		c.throw(&hostError{code: CodeSandboxUnavailable, msg: fmt.Sprintf("sandbox.%s: the sandbox has no workspace", fn)}, "")
	}
	if err := c.ctx.Err(); err != nil {
		c.throw(fmt.Errorf("sandbox.%s: %w", fn, err), "")
	}
	return ws
}

func (c *call) pathArg(fn string, v goja.Value, optional bool) string {
	if optional && isNullish(v) {
		return "."
	}
	p, ok := asString(v)
	if !ok {
		c.throw(argErr("sandbox.%s: want a path string, got %s", fn, typeName(v)), "")
	}
	return p
}

func (c *call) readFile(fc goja.FunctionCall) goja.Value {
	p := c.pathArg("ReadFile", fc.Argument(0), false)
	// The hook's context bounds the read; a FIFO or device the agent
	// planted is refused (SANDBOX_SPECIAL_FILE), never opened.
	b, err := c.workspace("ReadFile").ReadFile(c.ctx, p, MaxReadFile)
	if err != nil {
		c.throw(err, CodeIO)
	}
	return c.vm.ToValue(string(b))
}

func (c *call) writeFile(fc goja.FunctionCall) goja.Value {
	p := c.pathArg("WriteFile", fc.Argument(0), false)
	var data []byte
	switch x := fc.Argument(1).Export().(type) {
	case string:
		data = []byte(x)
	case goja.ArrayBuffer:
		data = x.Bytes()
	case []byte:
		data = x
	default:
		c.throw(argErr("sandbox.WriteFile(%q): want content as a string, got %s", p, typeName(fc.Argument(1))), "")
	}
	if err := c.workspace("WriteFile").WriteFile(c.ctx, p, data, 0o644); err != nil {
		c.throw(err, CodeIO)
	}
	return goja.Undefined()
}

func (c *call) listDir(fc goja.FunctionCall) goja.Value {
	p := c.pathArg("ListDir", fc.Argument(0), true)
	infos, err := c.workspace("ListDir").ListDir(c.ctx, p)
	if err != nil {
		c.throw(err, CodeIO)
	}
	items := make([]any, len(infos))
	for i, fi := range infos {
		o := c.vm.NewObject()
		_ = o.Set("name", fi.Name)
		_ = o.Set("size", fi.Size)
		_ = o.Set("is_dir", fi.IsDir)
		_ = o.Set("mod_time", fi.ModTime.UTC().Format(time.RFC3339))
		items[i] = o
	}
	return c.vm.NewArray(items...)
}

// exec is ctx.sandbox.Exec(argv, opts?): stdout on exit 0, an ExecError
// (EXEC_FAILED with exit_code, stdout, stderr) otherwise.
func (c *call) exec(fc goja.FunctionCall) goja.Value {
	req := sandbox.ExecRequest{}
	optsV := fc.Argument(1)
	if !isNullish(optsV) {
		if !isPlainObject(optsV) {
			c.throw(argErr("sandbox.Exec: options: want an object, got %s", typeName(optsV)), "")
		}
		c.execOptions(&req, optsV.(*goja.Object))
	}
	argvV := fc.Argument(0)
	if script, ok := asString(argvV); ok {
		if !req.Shell {
			c.throw(argErr("sandbox.Exec: want argv as an array of strings (a string is a shell script only with {shell: true})"), "")
		}
		req.Argv = []string{script}
	} else {
		o, ok := argvV.(*goja.Object)
		if !ok || o.ClassName() != "Array" {
			c.throw(argErr("sandbox.Exec: want argv as an array of strings, got %s", typeName(argvV)), "")
		}
		n := int(o.Get("length").ToInteger())
		for i := range n {
			e := o.Get(fmt.Sprint(i))
			s, ok := asString(e)
			if !ok {
				c.throw(argErr("sandbox.Exec: argv[%d]: want a string, got %s", i, typeName(e)), "")
			}
			req.Argv = append(req.Argv, s)
		}
	}
	switch {
	case len(req.Argv) == 0 || req.Argv[0] == "":
		c.throw(argErr("sandbox.Exec: argv is empty: name a program"), "")
	case req.Shell && len(req.Argv) != 1:
		c.throw(argErr("sandbox.Exec: with {shell: true} give one script, got %d arguments", len(req.Argv)), "")
	}
	for i, a := range req.Argv {
		if strings.IndexByte(a, 0) >= 0 {
			c.throw(argErr("sandbox.Exec: argv[%d] contains a NUL byte", i), "")
		}
	}
	if err := c.ctx.Err(); err != nil {
		c.throw(fmt.Errorf("sandbox.Exec: %w", err), "")
	}
	res, err := c.hc.Sandbox.Exec(c.ctx, req)
	if err != nil {
		c.throw(fmt.Errorf("exec %s: %w", cmdline(req.Argv), err), CodeIO)
	}
	if res.Truncated {
		c.hostLog(slog.LevelWarn, "sandbox.Exec output was truncated", "command", req.Argv[0])
	}
	if res.ExitCode != 0 {
		msg := fmt.Sprintf("command %s exited with code %d", cmdline(req.Argv), res.ExitCode)
		if line := firstLine(res.Stderr); line != "" {
			msg += ": " + line
		}
		c.throw(&hostError{code: CodeExecFailed, msg: msg, props: map[string]any{
			"exit_code": res.ExitCode, "stdout": res.Stdout, "stderr": res.Stderr,
		}}, "")
	}
	return c.vm.ToValue(res.Stdout)
}

func (c *call) execOptions(req *sandbox.ExecRequest, o *goja.Object) {
	for _, k := range o.Keys() {
		v := o.Get(k)
		if isNullish(v) {
			continue
		}
		switch k {
		case "cwd":
			s, ok := asString(v)
			if !ok {
				c.throw(argErr("sandbox.Exec: cwd: want a string, got %s", typeName(v)), "")
			}
			if _, err := sandbox.Rel(s); err != nil {
				c.throw(fmt.Errorf("sandbox.Exec: cwd: %w", err), "")
			}
			req.Dir = s
		case "env":
			if !isPlainObject(v) {
				c.throw(argErr("sandbox.Exec: env: want an object of strings, got %s", typeName(v)), "")
			}
			eo := v.(*goja.Object)
			req.Env = map[string]string{}
			for _, name := range eo.Keys() {
				ev := eo.Get(name)
				s, ok := asString(ev)
				if !ok {
					c.throw(argErr("sandbox.Exec: env.%s: want a string, got %s", name, typeName(ev)), "")
				}
				if name == "" || strings.ContainsAny(name, "=\x00") || strings.IndexByte(s, 0) >= 0 {
					c.throw(argErr("sandbox.Exec: env: %q is not a valid variable", name), "")
				}
				req.Env[name] = s
			}
		case "timeout":
			f := v.ToFloat()
			if _, ok := asString(v); ok || math.IsNaN(f) || f <= 0 || math.IsInf(f, 0) {
				c.throw(argErr("sandbox.Exec: timeout: want a positive number of milliseconds, got %s", v.String()), "")
			}
			req.Timeout = time.Duration(f * float64(time.Millisecond))
		case "stdin":
			s, ok := asString(v)
			if !ok {
				c.throw(argErr("sandbox.Exec: stdin: want a string, got %s", typeName(v)), "")
			}
			req.Stdin = strings.NewReader(s)
		case "shell":
			b, ok := asBool(v)
			if !ok {
				c.throw(argErr("sandbox.Exec: shell: want a boolean, got %s", typeName(v)), "")
			}
			req.Shell = b
		default:
			c.throw(argErr("sandbox.Exec: unknown option %q (want %s)", k, strings.Join(execOptionKeys, ", ")), "")
		}
	}
}

// cmdline renders argv for messages, shortened.
func cmdline(argv []string) string {
	parts := slices.Clone(argv)
	for i, a := range parts {
		if a == "" || strings.ContainsAny(a, " \t\n\"'") {
			parts[i] = fmt.Sprintf("%q", a)
		}
	}
	s := strings.Join(parts, " ")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

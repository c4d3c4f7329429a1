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
		c.throw(&hostError{code: CodeSandboxUnavailable, msg: fmt.Sprintf("%s: the sandbox has no workspace", fn)}, "")
	}
	if err := c.ctx.Err(); err != nil {
		c.throw(fmt.Errorf("%s: %w", fn, err), "")
	}
	return ws
}

func (c *call) pathArg(fn string, v goja.Value, optional bool) string {
	if optional && isNullish(v) {
		return "."
	}
	p, ok := asString(v)
	if !ok {
		c.throw(argErr("%s: want a path string, got %s", fn, typeName(v)), "")
	}
	return p
}

func (c *call) readFile(fc goja.FunctionCall) goja.Value { return c.readFrom("sandbox.ReadFile", fc) }

// readFrom is ReadFile(path) for fn: the file's content as text.
func (c *call) readFrom(fn string, fc goja.FunctionCall) goja.Value {
	p := c.pathArg(fn, fc.Argument(0), false)
	// The hook's context bounds the read; a FIFO or device the agent
	// planted is refused (SANDBOX_SPECIAL_FILE), never opened.
	b, err := c.workspace(fn).ReadFile(c.ctx, p, MaxReadFile)
	if err != nil {
		c.throw(err, CodeIO)
	}
	return c.vm.ToValue(string(b))
}

func (c *call) writeFile(fc goja.FunctionCall) goja.Value {
	c.writeTo("sandbox.WriteFile", fc)
	return goja.Undefined()
}

func (c *call) listDir(fc goja.FunctionCall) goja.Value {
	p := c.pathArg("sandbox.ListDir", fc.Argument(0), true)
	infos, err := c.workspace("sandbox.ListDir").ListDir(c.ctx, p)
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
	req := c.execRequest("sandbox.Exec", fc, false)
	res := c.run("sandbox.Exec", req)
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

// execRequest parses Exec's (argv, opts?) for fn. A string argv is a
// shell script with {shell: true}; without it, fields splits it on white
// space into argv (Yao's ctx.computer.Exec) or it is refused (fields
// false: ctx.sandbox.Exec, where a string is ambiguous).
func (c *call) execRequest(fn string, fc goja.FunctionCall, fields bool) sandbox.ExecRequest {
	req := sandbox.ExecRequest{}
	optsV := fc.Argument(1)
	if !isNullish(optsV) {
		if !isPlainObject(optsV) {
			c.throw(argErr("%s: options: want an object, got %s", fn, typeName(optsV)), "")
		}
		c.execOptions(fn, &req, optsV.(*goja.Object))
	}
	argvV := fc.Argument(0)
	if script, ok := asString(argvV); ok && fields && !req.Shell {
		req.Argv = strings.Fields(script)
	} else if ok {
		if !req.Shell {
			c.throw(argErr("%s: want argv as an array of strings (a string is a shell script only with {shell: true})", fn), "")
		}
		req.Argv = []string{script}
	} else {
		o, ok := argvV.(*goja.Object)
		if !ok || o.ClassName() != "Array" {
			c.throw(argErr("%s: want argv as an array of strings, got %s", fn, typeName(argvV)), "")
		}
		n := int(o.Get("length").ToInteger())
		for i := range n {
			e := o.Get(fmt.Sprint(i))
			s, ok := asString(e)
			if !ok {
				c.throw(argErr("%s: argv[%d]: want a string, got %s", fn, i, typeName(e)), "")
			}
			req.Argv = append(req.Argv, s)
		}
	}
	switch {
	case len(req.Argv) == 0 || req.Argv[0] == "":
		c.throw(argErr("%s: argv is empty: name a program", fn), "")
	case req.Shell && len(req.Argv) != 1:
		c.throw(argErr("%s: with {shell: true} give one script, got %d arguments", fn, len(req.Argv)), "")
	}
	for i, a := range req.Argv {
		if strings.IndexByte(a, 0) >= 0 {
			c.throw(argErr("%s: argv[%d] contains a NUL byte", fn, i), "")
		}
	}
	return req
}

// run runs req in the request's sandbox with the hook's context. A failure
// to run is thrown; an exit code, whatever it is, is the caller's.
func (c *call) run(fn string, req sandbox.ExecRequest) *sandbox.ExecResult {
	if err := c.ctx.Err(); err != nil {
		c.throw(fmt.Errorf("%s: %w", fn, err), "")
	}
	res, err := c.hc.Sandbox.Exec(c.ctx, req)
	if err != nil {
		c.throw(fmt.Errorf("exec %s: %w", cmdline(req.Argv), err), CodeIO)
	}
	if res.Truncated {
		c.hostLog(slog.LevelWarn, fn+" output was truncated", "command", req.Argv[0])
	}
	return res
}

func (c *call) execOptions(fn string, req *sandbox.ExecRequest, o *goja.Object) {
	for _, k := range o.Keys() {
		v := o.Get(k)
		if isNullish(v) {
			continue
		}
		switch k {
		case "cwd":
			s, ok := asString(v)
			if !ok {
				c.throw(argErr("%s: cwd: want a string, got %s", fn, typeName(v)), "")
			}
			if _, err := sandbox.Rel(s); err != nil {
				c.throw(fmt.Errorf("%s: cwd: %w", fn, err), "")
			}
			req.Dir = s
		case "env":
			if !isPlainObject(v) {
				c.throw(argErr("%s: env: want an object of strings, got %s", fn, typeName(v)), "")
			}
			eo := v.(*goja.Object)
			req.Env = map[string]string{}
			for _, name := range eo.Keys() {
				ev := eo.Get(name)
				s, ok := asString(ev)
				if !ok {
					c.throw(argErr("%s: env.%s: want a string, got %s", fn, name, typeName(ev)), "")
				}
				if name == "" || strings.ContainsAny(name, "=\x00") || strings.IndexByte(s, 0) >= 0 {
					c.throw(argErr("%s: env: %q is not a valid variable", fn, name), "")
				}
				req.Env[name] = s
			}
		case "timeout":
			f := v.ToFloat()
			if _, ok := asString(v); ok || math.IsNaN(f) || f <= 0 || math.IsInf(f, 0) {
				c.throw(argErr("%s: timeout: want a positive number of milliseconds, got %s", fn, v.String()), "")
			}
			req.Timeout = time.Duration(f * float64(time.Millisecond))
		case "stdin":
			s, ok := asString(v)
			if !ok {
				c.throw(argErr("%s: stdin: want a string, got %s", fn, typeName(v)), "")
			}
			req.Stdin = strings.NewReader(s)
		case "shell":
			b, ok := asBool(v)
			if !ok {
				c.throw(argErr("%s: shell: want a boolean, got %s", fn, typeName(v)), "")
			}
			req.Shell = b
		default:
			c.throw(argErr("%s: unknown option %q (want %s)", fn, k, strings.Join(execOptionKeys, ", ")), "")
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

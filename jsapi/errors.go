package jsapi

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/dop251/goja"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/sandbox"
)

// Stable error codes. Errors thrown into JS carry one as their code
// property, so hooks can branch on them; a failed hook call returns an
// *Error with one (or with the code the script's own error carried).
const (
	// CodePathOutside: a sandbox path resolves outside the workspace
	// (sandbox.ErrPathOutside).
	CodePathOutside = "SANDBOX_PATH_OUTSIDE"
	// CodeNotFound: a file or folder does not exist (sandbox.ErrNotFound).
	CodeNotFound = "NOT_FOUND"
	// CodeExecTimeout: a command ran past its timeout (sandbox.ErrExecTimeout).
	CodeExecTimeout = "EXEC_TIMEOUT"
	// CodeExecFailed: a command exited with a non-zero code; the error
	// carries exit_code, stdout and stderr.
	CodeExecFailed = "EXEC_FAILED"
	// CodeInvalidArgument: a ctx function was called with a wrong argument.
	CodeInvalidArgument = "INVALID_ARGUMENT"
	// CodeMemory: the memory store failed or a value cannot be stored.
	CodeMemory = "MEMORY_ERROR"
	// CodeSandboxUnavailable: the sandbox engine is not answering
	// (sandbox.ErrEngineUnavailable).
	CodeSandboxUnavailable = "SANDBOX_UNAVAILABLE"
	// CodeSandboxRemoved: the sandbox is gone (sandbox.ErrRemoved).
	CodeSandboxRemoved = "SANDBOX_REMOVED"
	// CodeFileTooLarge: ReadFile on a file larger than MaxReadFile
	// (sandbox.ErrFileTooLarge).
	CodeFileTooLarge = "FILE_TOO_LARGE"
	// CodeSpecialFile: a sandbox path names a FIFO, socket or device,
	// which the host never opens (sandbox.ErrSpecialFile).
	CodeSpecialFile = "SANDBOX_SPECIAL_FILE"
	// CodeDiskFull: the workspace reached its disk limit
	// (sandbox.ErrDiskFull).
	CodeDiskFull = "SANDBOX_DISK_FULL"
	// CodeIO: any other file or command failure.
	CodeIO = "IO_ERROR"
	// CodeNoDesktop: a desktop call in a sandbox without a desktop.
	CodeNoDesktop = "NO_DESKTOP"
	// CodeMCP: an MCP server of ctx.mcp cannot be reached, is not one of
	// the assistant's, or failed the call.
	CodeMCP = "MCP_ERROR"
	// CodeHookTimeout: the hook ran past its timeout.
	CodeHookTimeout = "HOOK_TIMEOUT"
	// CodeCanceled: the request ended (client gone) while the hook ran.
	CodeCanceled = "CANCELED"
	// CodeHookError: the hook threw something that carries no code of its
	// own (a plain Error, a string).
	CodeHookError = "HOOK_ERROR"
	// CodeInvalidResult: the hook returned a value of the wrong shape.
	CodeInvalidResult = "INVALID_RESULT"
	// CodeNoFunction: Call named a function the hooks do not define.
	CodeNoFunction = "NO_FUNCTION"
)

// jsCodes are the codes that can be thrown into JS by ctx functions, with
// the error name each gets. agentbox.d.ts declares the same set.
var jsCodes = map[string]string{
	CodePathOutside:        "SandboxError",
	CodeNotFound:           "NotFoundError",
	CodeExecTimeout:        "TimeoutError",
	CodeExecFailed:         "ExecError",
	CodeInvalidArgument:    "TypeError",
	CodeMemory:             "MemoryError",
	CodeSandboxUnavailable: "SandboxError",
	CodeSandboxRemoved:     "SandboxError",
	CodeFileTooLarge:       "SandboxError",
	CodeSpecialFile:        "SandboxError",
	CodeDiskFull:           "SandboxError",
	CodeIO:                 "SandboxError",
	CodeNoDesktop:          "SandboxError",
	CodeMCP:                "MCPError",
	CodeHookTimeout:        "TimeoutError",
	CodeCanceled:           "AbortError",
	CodeYaoOnly:            "YaoOnlyError",
}

// ErrNoFunction is returned (wrapped in an *Error) by Call for a function
// the hooks do not define.
var ErrNoFunction = errors.New("no such hook function")

// Error is a failed hook call: the script threw, ran past its timeout, was
// cancelled, or returned the wrong shape. It is what the pipeline turns into
// a rejection (Create) or a notice (Next).
type Error struct {
	// Hook is the function that failed ("Create", "Next", a tool name).
	Hook string
	// Name is the JS error's name ("Error", "TypeError", "ExecError", ...).
	Name string
	// Message is the error's message, as the script gave it.
	Message string
	// Code is the error's code property when it has one, else one of
	// CodeHookError, CodeHookTimeout, CodeCanceled, CodeInvalidResult.
	Code string
	// File, Line and Column locate the throw in the hook source (relative
	// to the assistant folder), when known.
	File         string
	Line, Column int
	// Stack is the JS stack trace, mapped to the hook source.
	Stack string
	// Err is the underlying cause (context.DeadlineExceeded on a timeout,
	// context.Canceled when the request ended, ErrNoFunction).
	Err error
}

// Error renders "Hook hook: Name: message (at file:line:col)".
func (e *Error) Error() string {
	var b strings.Builder
	switch {
	case strings.Contains(e.Hook, "."):
		// A process (scripts.tests.mcp.Echo), not a hook.
		b.WriteString(e.Hook)
		b.WriteString(": ")
	case e.Hook != "":
		b.WriteString(e.Hook)
		b.WriteString(" hook: ")
	}
	if e.Name != "" && e.Name != "Error" {
		b.WriteString(e.Name)
		b.WriteString(": ")
	}
	b.WriteString(e.Message)
	if e.File != "" {
		fmt.Fprintf(&b, " (at %s:%d:%d)", e.File, e.Line, e.Column)
	}
	return b.String()
}

// Unwrap returns the cause (a context error on timeout or cancellation).
func (e *Error) Unwrap() error { return e.Err }

// Stack is the hook source's stack trace of err's *Error, "" when err
// holds none: for the log and the terminal, not for clients.
func Stack(err error) string {
	var je *Error
	if errors.As(err, &je) {
		return je.Stack
	}
	return ""
}

// ChatError is where a failed hook call leaves the hook API: the *chat.Error
// a turn fails with when its Create hook failed. It is chat.ErrCanceled when
// the request ended, else chat.ErrHook with a message naming the hook; the
// *Error, with the code hooks see, stays its cause.
func ChatError(err error) *chat.Error {
	if errors.Is(err, context.Canceled) {
		return &chat.Error{Code: chat.ErrCanceled, Message: "the request was canceled", Err: err}
	}
	var je *Error
	if errors.As(err, &je) {
		// Its position is the app author's, in the assistant's own source:
		// it says where to look, and holds nothing of the server.
		return &chat.Error{Code: chat.ErrHook, Message: je.Error(), Err: err}
	}
	return &chat.Error{Code: chat.ErrHook, Message: "hook: " + err.Error(), Err: err}
}

// hostError is a Go-side failure that a ctx function throws into JS as an
// error object with a code and extra properties.
type hostError struct {
	code  string
	msg   string
	props map[string]any
}

func (e *hostError) Error() string { return e.msg }

func argErr(format string, args ...any) *hostError {
	return &hostError{code: CodeInvalidArgument, msg: fmt.Sprintf(format, args...)}
}

// codeFor maps a Go error from the sandbox, workspace or memory store to
// its stable code.
func codeFor(err error, fallback string) string {
	var he *hostError
	switch {
	case errors.As(err, &he):
		return he.code
	case errors.Is(err, sandbox.ErrPathOutside):
		return CodePathOutside
	case errors.Is(err, sandbox.ErrNotFound):
		return CodeNotFound
	case errors.Is(err, sandbox.ErrExecTimeout):
		return CodeExecTimeout
	case errors.Is(err, sandbox.ErrEngineUnavailable):
		return CodeSandboxUnavailable
	case errors.Is(err, sandbox.ErrRemoved):
		return CodeSandboxRemoved
	case errors.Is(err, sandbox.ErrSpecialFile):
		return CodeSpecialFile
	case errors.Is(err, sandbox.ErrFileTooLarge):
		return CodeFileTooLarge
	case errors.Is(err, sandbox.ErrDiskFull):
		return CodeDiskFull
	case errors.Is(err, context.DeadlineExceeded):
		return CodeHookTimeout
	case errors.Is(err, context.Canceled):
		return CodeCanceled
	}
	return fallback
}

// throw raises err inside JS as an Error object with name, message and a
// stable code (plus the hostError's extra properties). It never returns.
func (c *call) throw(err error, fallback string) {
	code := codeFor(err, fallback)
	name := jsCodes[code]
	if name == "" {
		name = "Error"
	}
	// NewGoError builds on the runtime's own Error intrinsics, whatever a
	// hook did to the Error global; its "value" (the Go error) stays private.
	obj := c.vm.NewGoError(err)
	_ = obj.Delete("value")
	_ = obj.Set("name", name)
	_ = obj.Set("code", code)
	var he *hostError
	if errors.As(err, &he) {
		for k, v := range he.props {
			_ = obj.Set(k, v)
		}
	}
	panic(obj)
}

// hookError turns what a hook call returned as an error (a JS exception, an
// interrupt, a Go panic) into an *Error.
func (c *call) hookError(err error) *Error {
	e := &Error{Hook: c.hook}
	var ie *goja.InterruptedError
	if errors.As(err, &ie) {
		cause, _ := ie.Value().(error)
		e.Err = cause
		switch {
		case errors.Is(cause, context.DeadlineExceeded) && c.timedOut():
			e.Name, e.Code = "TimeoutError", CodeHookTimeout
			e.Message = fmt.Sprintf("%s ran past its timeout of %s and was stopped", c.hook, c.h.timeout)
		case errors.Is(cause, context.DeadlineExceeded):
			e.Name, e.Code = "TimeoutError", CodeHookTimeout
			e.Message = fmt.Sprintf("%s was stopped: the request's deadline passed", c.hook)
		default:
			e.Name, e.Code = "AbortError", CodeCanceled
			e.Message = fmt.Sprintf("%s was stopped: the request was cancelled", c.hook)
		}
		e.Stack = formatStack(e, ie.Stack())
		c.position(e, ie.Stack())
		return e
	}
	var so *goja.StackOverflowError
	if errors.As(err, &so) {
		e.Err = err
		e.Name, e.Code = "RangeError", CodeHookError
		e.Message = "Maximum call stack size exceeded"
		e.Stack = formatStack(e, so.Stack())
		c.position(e, so.Stack())
		return e
	}
	var ex *goja.Exception
	if errors.As(err, &ex) {
		e.Err = err
		e.Name, e.Code = "Error", CodeHookError
		c.describe(e, ex.Value())
		c.sandboxHint(e)
		if e.Name == "TypeError" {
			e.Message += memberHint(e.Message)
		}
		e.Stack = formatStack(e, ex.Stack())
		// A host error the hook let through keeps its cause for errors.Is.
		if e.Code == CodeHookTimeout && c.ctx.Err() != nil {
			e.Err = c.ctx.Err()
		}
		c.position(e, ex.Stack())
		return e
	}
	var he *Error
	if errors.As(err, &he) {
		return he
	}
	e.Name, e.Code, e.Message, e.Err = "Error", CodeHookError, err.Error(), err
	return e
}

// undefinedProp is goja's TypeError for a member read off undefined.
var undefinedProp = regexp.MustCompile(`^Cannot read property '([^']+)' of undefined or null`)

// sandboxHint names the member a hook used on an assistant without a
// sandbox: ctx.sandbox, ctx.workspace and ctx.computer are undefined there
// (Yao hooks test them), so reading a method off one fails with goja's
// bare TypeError.
func (c *call) sandboxHint(e *Error) {
	if c.hc.Sandbox != nil || e.Name != "TypeError" {
		return
	}
	m := undefinedProp.FindStringSubmatch(e.Message)
	if m == nil {
		return
	}
	var objs []string
	for obj, members := range map[string][]string{"sandbox": sandboxMembers, "workspace": workspaceMembers, "computer": computerMembers} {
		if slices.Contains(members, m[1]) {
			objs = append(objs, "ctx."+obj)
		}
	}
	if len(objs) == 0 {
		return
	}
	slices.Sort(objs)
	e.Message += fmt.Sprintf(" (%s is undefined: assistant %q has no sandbox, so its hooks have no %s; test it first, or give the assistant a sandbox)",
		strings.Join(objs, " or "), c.hc.AssistantID, strings.Join(objs, " or "))
}

// describe fills name, message and code from a thrown JS value.
func (c *call) describe(e *Error, v goja.Value) {
	if v == nil || goja.IsUndefined(v) || goja.IsNull(v) {
		e.Message = "threw " + fmt.Sprint(v)
		return
	}
	obj, ok := v.(*goja.Object)
	if !ok {
		e.Message = v.String()
		return
	}
	if s := stringProp(obj, "message"); s != "" {
		e.Message = s
	} else {
		e.Message = v.String()
	}
	if s := stringProp(obj, "name"); s != "" {
		e.Name = s
	}
	if s := stringProp(obj, "code"); s != "" {
		e.Code = s
	}
}

func stringProp(obj *goja.Object, name string) string {
	v := obj.Get(name)
	if v == nil || goja.IsUndefined(v) || goja.IsNull(v) {
		return ""
	}
	if _, ok := asString(v); !ok {
		return ""
	}
	return v.String()
}

// maxStackFrames bounds a formatted stack: runaway recursion would
// otherwise make it thousands of lines.
const maxStackFrames = 10

// formatStack renders a stack trace like V8 does ("Name: message" then
// "    at fn (file:line:col)"), with the source-mapped positions 1-based,
// at most maxStackFrames frames.
func formatStack(e *Error, frames []goja.StackFrame) string {
	var b strings.Builder
	b.WriteString(e.Name)
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	more := len(frames) - maxStackFrames
	if more > 0 {
		frames = frames[:maxStackFrames]
	}
	for _, f := range frames {
		p := f.Position()
		b.WriteString("\n    at ")
		fn := f.FuncName()
		switch {
		case p.Filename == "":
			if fn == "" {
				fn = "<anonymous>"
			}
			b.WriteString(fn + " (native)")
			continue
		case fn != "":
			b.WriteString(fn + " (")
		default:
			b.WriteString("(")
		}
		col := p.Column
		if p.Filename != bundleName {
			col++
		}
		fmt.Fprintf(&b, "%s:%d:%d)", p.Filename, p.Line, col)
	}
	if more > 0 {
		fmt.Fprintf(&b, "\n    ... %d more", more)
	}
	return b.String()
}

// position takes the innermost frame that lies in the hook source.
func (c *call) position(e *Error, frames []goja.StackFrame) {
	for _, f := range frames {
		p := f.Position()
		if p.Filename == "" || p.Line == 0 || p.Filename == bundleName {
			continue
		}
		// goja reports source-mapped columns 0-based.
		e.File, e.Line, e.Column = p.Filename, p.Line, p.Column+1
		return
	}
}

package jsapi

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"github.com/dop251/goja"
)

// maxLogLine bounds one log message from a hook, in bytes.
const maxLogLine = 16 << 10

// Members of the log and console globals (agentbox.d.ts declares them).
var (
	// logLevels are Yao's log object's (gou objects/log): Trace below
	// Debug; Fatal and Panic at error level (neither ends the server
	// here; Panic throws, as Yao's does).
	logLevels = map[string]slog.Level{
		"Trace": LevelTrace,
		"Debug": slog.LevelDebug,
		"Info":  slog.LevelInfo,
		"Warn":  slog.LevelWarn,
		"Error": slog.LevelError,
		"Fatal": slog.LevelError,
		"Panic": slog.LevelError,
	}
	consoleLevels = map[string]slog.Level{
		"log":   slog.LevelInfo,
		"info":  slog.LevelInfo,
		"debug": slog.LevelDebug,
		"warn":  slog.LevelWarn,
		"error": slog.LevelError,
	}
	logGlobals = map[string]map[string]slog.Level{"log": logLevels, "console": consoleLevels}
	logKeys    = map[string][]string{
		"log":     slices.Sorted(maps.Keys(logLevels)),
		"console": slices.Sorted(maps.Keys(consoleLevels)),
	}
)

// LevelTrace is the level of log.Trace lines: below debug.
const LevelTrace = slog.LevelDebug - 4

// logger is the Logger the hooks of this request write to.
func (c *Context) logger() *slog.Logger {
	if c.Logger != nil {
		return c.Logger
	}
	return slog.Default().With("assistant", c.AssistantID, "user", c.UserID, "chat", c.ChatID)
}

// installLog defines the log and console globals.
func (c *call) installLog() {
	for name, levels := range logGlobals {
		o := c.newLazy(logKeys[name], func(fn string) goja.Value {
			level := levels[fn]
			panics := name == "log" && fn == "Panic"
			return c.vm.ToValue(nativeFn(func(fc goja.FunctionCall) goja.Value {
				msg := c.logLine(level, fc.Arguments)
				if panics {
					c.throw(errors.New(msg), CodeHookError)
				}
				return goja.Undefined()
			}))
		})
		_ = c.vm.Set(name, o)
	}
}

// log returns the call's logger, made on first use.
func (c *call) log() *slog.Logger {
	if c.logger == nil {
		c.logger = c.hc.logger().With("hook", c.hook)
	}
	return c.logger
}

// hostLog writes a line of the engine's own about the hook.
func (c *call) hostLog(level slog.Level, msg string, args ...any) {
	c.log().Log(context.WithoutCancel(c.ctx), level, msg, args...)
}

// logLine writes one line: the arguments joined by spaces, strings as they are
// and other values as JSON (console.log's habit).
func (c *call) logLine(level slog.Level, args []goja.Value) string {
	// The log's own context, not the hook's: a line logged just before the
	// deadline is still written.
	ctx := context.WithoutCancel(c.ctx)
	if !c.log().Enabled(ctx, level) && level < slog.LevelError {
		return ""
	}
	var b strings.Builder
	for i, a := range args {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(c.logString(a))
		if b.Len() > maxLogLine {
			break
		}
	}
	msg := b.String()
	if len(msg) > maxLogLine {
		msg = msg[:maxLogLine] + "...(truncated)"
	}
	c.logger.Log(ctx, level, msg, "source", "js")
	return msg
}

func (c *call) logString(v goja.Value) string {
	if v == nil || goja.IsUndefined(v) {
		return "undefined"
	}
	if _, ok := v.(*goja.Object); !ok {
		return v.String()
	}
	if isFunction(v) {
		return "[Function]"
	}
	if o := v.(*goja.Object); o.ClassName() == "Error" {
		if s := stringProp(o, "stack"); s != "" {
			return s
		}
		return v.String()
	}
	if s, ok, err := c.stringify(v); err == nil && ok {
		return s
	}
	return v.String()
}

// Package jsapi runs an assistant's hooks, written in TypeScript or
// JavaScript, in the goja engine.
//
// # Loading
//
// [Load] bundles the hook entry file (src/index.ts or src/index.js) and every
// file it imports with esbuild, down to ES2017, and compiles the bundle once
// to a goja program. Syntax and type-stripping errors name file:line:col
// relative to the assistant folder. Hooks may be plain top-level functions
// (function Create(ctx, messages, options) {...}) or exported ones
// (export function Create ...); both are found.
//
// # Calling
//
// Every hook call ([Hooks.Create], [Hooks.Next], [Hooks.Call]) runs in a
// runtime of its own: a goja Runtime is both the isolate and the global
// scope, and a new one costs a few microseconds, so starting afresh is the
// only reset that also undoes changes to built-in prototypes. The compiled
// program is shared; nothing a hook leaves behind (globals, module state,
// patched built-ins) is seen by another call, whoever made it. A call is
// bounded by the assistant's hook timeout (default 5 s) and by the caller's
// context: when either ends the runtime is interrupted, and host calls the
// hook makes (sandbox Exec, memory) run with the same deadline.
//
// # The ctx API
//
// Hooks receive a ctx object: ids, locale and metadata; Send, SendStream,
// Append, Replace and End to stream messages to the client; memory with
// user, chat and context namespaces; sandbox, and Yao's sandbox v2
// workspace and computer (sandboxed assistants only), with confined file
// operations and Exec; agent, to call other assistants through the
// pipeline's Agents (a Create or Next result may also delegate the turn);
// llm, to call the app's connectors through the pipeline's LLM; mcp, to
// reach the assistant's MCP servers through the pipeline's MCPServers; and
// log/console globals. Errors
// thrown into JS carry a stable code (see the Code* constants). The
// declaration file agentbox.d.ts describes all of it for editors; a test
// keeps it in sync with what this package registers.
package jsapi

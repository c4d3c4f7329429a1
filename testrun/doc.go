// Package testrun runs an app's assistant tests in Yao's test format, the
// format of `yao agent test`: agent tests (JSONL cases next to the
// assistant, tests/inputs.jsonl) and script tests (*_test.ts files next to
// hooks and tools, with Test...(t, ctx) functions).
//
// # Agent tests
//
// A case (Case) is one JSON object: an id, an input (text, a message, or a
// conversation), assertions (contains, regex, json_path, equals, type,
// schema, tool_called, tool_result, script, an agent as judge, each
// negatable), optional before/after functions of the assistant's
// *_test.ts files, a timeout, and, for multi-turn cases driven by a
// simulated user, a simulator assistant and checkpoints. Cases run through
// the pipeline's public API (Backend.Chat) as the test user, each in a chat
// of its own: a sandboxed assistant runs in its real sandbox, and the
// workspace of a case that did not pass is kept (Result.Workspace says
// where).
//
// # Script tests
//
// A *_test.ts file is bundled and run by the hook engine (package jsapi)
// exactly as hooks are, so it imports the hook code it tests. Each Test...
// function gets Yao's t (assertions, logging, skip, fail) and a ctx whose
// memory, sandbox and model calls are the real ones or scripted by the
// context file (ContextConfig). A test that uses one of Yao's globals that
// agentbox does not have (Process, models, tables) is skipped with a reason
// that starts with YAO_ONLY.
//
// # Reports
//
// A Run produces Events as it goes (the progress the CLI prints and the
// server streams) and a Report at the end, written as Yao's JSONL events
// (WriteJSONL), Yao's JSON report, Markdown, a self-contained HTML page, or
// JUnit XML (Format picks by file extension).
package testrun

package jsapi

import _ "embed"

// Declarations is agentbox.d.ts: the TypeScript declarations of the ctx API,
// for tools that scaffold an assistant (write it to src/agentbox.d.ts).
//
//go:embed agentbox.d.ts
var Declarations string

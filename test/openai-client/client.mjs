// Drives the official openai npm client against an agentbox server and
// prints what it saw as one JSON object. Used by openai_client_test.go.
//
// env: AGENTBOX_URL (server base URL), AGENTBOX_TOKEN, AGENTBOX_NODE_MODULES
// (the node_modules folder holding openai).
import { createRequire } from 'node:module';
import path from 'node:path';

const require = createRequire(path.join(process.env.AGENTBOX_NODE_MODULES, '_'));
const { OpenAI, APIError } = require('openai');

const client = new OpenAI({
  baseURL: process.env.AGENTBOX_URL + '/v1',
  apiKey: process.env.AGENTBOX_TOKEN,
  maxRetries: 0,
});
const out = {};

const models = await client.models.list();
out.models = models.data.map((m) => m.id);

// Streaming with usage, the chat id in a header.
const { data: stream, response } = await client.chat.completions
  .create(
    {
      model: 'coder',
      stream: true,
      stream_options: { include_usage: true },
      messages: [
        { role: 'system', content: 'be brief' },
        { role: 'user', content: [{ type: 'text', text: 'list the files' }] },
      ],
    },
    { headers: { 'X-Chat-ID': 'chat-1' } },
  )
  .withResponse();
out.chatHeader = response.headers.get('x-chat-id');
out.content = '';
out.reasoning = '';
out.roles = [];
out.finish = [];
out.chunks = 0;
for await (const chunk of stream) {
  out.chunks++;
  if (chunk.usage) out.usage = chunk.usage;
  for (const c of chunk.choices) {
    if (c.delta.role) out.roles.push(c.delta.role);
    if (c.delta.content) out.content += c.delta.content;
    if (c.delta.reasoning_content) out.reasoning += c.delta.reasoning_content;
    if (c.finish_reason) out.finish.push(c.finish_reason);
  }
}

// The stream helper assembles the final message itself.
const runner = client.chat.completions.stream({
  model: 'coder',
  messages: [{ role: 'user', content: 'again' }],
});
const final = await runner.finalChatCompletion();
out.helperContent = final.choices[0].message.content;

// Non-streaming.
const done = await client.chat.completions.create({
  model: 'qa',
  messages: [{ role: 'user', content: 'hi' }],
});
out.plain = { content: done.choices[0].message.content, usage: done.usage, object: done.object };

// Errors: before the stream (HTTP status) and after it started (in-stream).
try {
  await client.chat.completions.create({ model: 'nope', messages: [{ role: 'user', content: 'x' }], stream: true });
} catch (e) {
  out.notFound = { isAPIError: e instanceof APIError, status: e.status, code: e.code, type: e.type, message: e.message };
}
try {
  const s = await client.chat.completions.create({ model: 'coder', messages: [{ role: 'user', content: 'fail' }], stream: true });
  let text = '';
  for await (const chunk of s) text += chunk.choices[0]?.delta?.content ?? '';
  out.midStream = { text, thrown: false };
} catch (e) {
  out.midStream = { isAPIError: e instanceof APIError, code: e.code, type: e.type, message: e.message, thrown: true };
}
const bad = new OpenAI({ baseURL: process.env.AGENTBOX_URL + '/v1', apiKey: 'wrong', maxRetries: 0 });
try {
  await bad.models.list();
} catch (e) {
  out.unauthorized = { status: e.status, name: e.constructor.name };
}

console.log(JSON.stringify(out));

// Drives the official openai package against agentbox and prints what it
// saw as one JSON object (openai_test.go checks it).
//
// env: AGENTBOX_URL, AGENTBOX_TOKEN.
import OpenAI, { APIError } from 'openai';

const client = new OpenAI({ baseURL: process.env.AGENTBOX_URL + '/v1', apiKey: process.env.AGENTBOX_TOKEN, maxRetries: 0 });
const out = { version: (await import('openai/version')).VERSION };
const err = (e) => ({ isAPIError: e instanceof APIError, status: e.status, type: e.type, code: e.code, param: e.param, message: e.message });

const weatherTool = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'The weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
};
const getWeather = ({ city }) => `18C and sunny in ${city}`;

// Models.
out.models = (await client.models.list()).data.map((m) => m.id);
out.model = await client.models.retrieve('qa');
try {
  await client.models.retrieve('gpt-4o');
} catch (e) {
  out.modelNotFound = err(e);
}

// Chat Completions: whole and streamed, with reasoning and usage; the chat
// id comes back in X-Chat-ID.
const whole = await client.chat.completions.create({ model: 'qa', messages: [{ role: 'user', content: 'The capital of France?' }] });
out.chat = { content: whole.choices[0].message.content, reasoning: whole.choices[0].message.reasoning_content, finish: whole.choices[0].finish_reason, usage: whole.usage };
const { data: stream, response } = await client.chat.completions
  .create({ model: 'qa', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'The capital of France, streamed?' }] }, { headers: { 'X-Chat-ID': 'sdk-chat-1' } })
  .withResponse();
out.chatStream = { chatID: response.headers.get('x-chat-id'), content: '', reasoning: '', finish: [], usageNullChunks: 0, chunks: 0 };
for await (const chunk of stream) {
  out.chatStream.chunks++;
  if (chunk.usage === null) out.chatStream.usageNullChunks++;
  if (chunk.usage) out.chatStream.usage = chunk.usage;
  for (const c of chunk.choices) {
    out.chatStream.content += c.delta.content ?? '';
    out.chatStream.reasoning += c.delta.reasoning_content ?? '';
    if (c.finish_reason) out.chatStream.finish.push(c.finish_reason);
  }
}
// The stream helper assembles the answer itself.
const helper = await client.chat.completions.stream({ model: 'claude-qa', messages: [{ role: 'user', content: 'The capital of France, from Claude?' }] }).finalChatCompletion();
out.chatHelper = { content: helper.choices[0].message.content, finish: helper.choices[0].finish_reason };

// A function-calling loop over Chat Completions, on both connectors.
for (const model of ['qa', 'claude-qa']) {
  const messages = [{ role: 'user', content: 'What is the weather in Paris?' }];
  const first = await client.chat.completions.create({ model, messages, tools: [weatherTool], tool_choice: 'auto' });
  const msg = first.choices[0].message;
  messages.push(msg);
  for (const call of msg.tool_calls ?? []) {
    messages.push({ role: 'tool', tool_call_id: call.id, content: getWeather(JSON.parse(call.function.arguments)) });
  }
  const second = await client.chat.completions.create({ model, messages, tools: [weatherTool] });
  out[`toolLoop_${model}`] = {
    finish: first.choices[0].finish_reason,
    calls: (msg.tool_calls ?? []).map((c) => ({ type: c.type, name: c.function.name, arguments: JSON.parse(c.function.arguments) })),
    answer: second.choices[0].message.content,
    finish2: second.choices[0].finish_reason,
  };
}
// The same loop streamed, with the SDK's runTools helper.
const runner = client.chat.completions.runTools({
  model: 'qa',
  stream: true,
  messages: [{ role: 'user', content: 'Stream me the weather in Paris' }],
  tools: [{ type: 'function', function: { ...weatherTool.function, function: getWeather, parse: JSON.parse } }],
});
out.runTools = { answer: await runner.finalContent(), calls: (await runner.allChatCompletions()).length };

// Structured output: response_format reaches both connectors (as
// output_config.format for Anthropic).
const schema = { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false };
out.structured = [];
for (const model of ['qa', 'claude-qa']) {
  const r = await client.chat.completions.create({ model, messages: [{ role: 'user', content: `The capital of France as JSON, from ${model}?` }], response_format: { type: 'json_schema', json_schema: { name: 'city', schema, strict: true } } });
  out.structured.push(r.choices[0].finish_reason);
}
try {
  await client.chat.completions.create({ model: 'claude-qa', messages: [{ role: 'user', content: 'The capital of France?' }], response_format: { type: 'json_object' } });
} catch (e) {
  out.jsonMode = err(e);
}

// Multi-turn: the whole conversation each time.
const turn1 = await client.chat.completions.create({ model: 'qa', messages: [{ role: 'user', content: 'My name is Ada.' }] });
const turn2 = await client.chat.completions.create({
  model: 'qa',
  messages: [{ role: 'user', content: 'My name is Ada.' }, turn1.choices[0].message, { role: 'user', content: 'What is my name?' }],
});
out.multiTurn = [turn1.choices[0].message.content, turn2.choices[0].message.content];

// finish_reason length, and an answer cut off after it started.
const cut = await client.chat.completions.create({ model: 'qa', messages: [{ role: 'user', content: 'Write an essay.' }] });
out.length = { finish: cut.choices[0].finish_reason, content: cut.choices[0].message.content };
try {
  let text = '';
  const s = await client.chat.completions.create({ model: 'qa', stream: true, messages: [{ role: 'user', content: 'Do not interrupt me.' }] });
  for await (const chunk of s) text += chunk.choices[0]?.delta?.content ?? '';
  out.midStream = { thrown: false, text };
} catch (e) {
  out.midStream = { thrown: true, ...err(e) };
}

// The assistants' options policy, and other errors.
const refused = async (name, body) => {
  try {
    await client.chat.completions.create({ messages: [{ role: 'user', content: 'The capital of France?' }], ...body });
    out[name] = { thrown: false };
  } catch (e) {
    out[name] = err(e);
  }
};
await refused('modelOverride', { model: 'qa', max_tokens: 5000 });
await refused('pickyEffort', { model: 'picky', reasoning_effort: 'high' });
await refused('pickyTokens', { model: 'picky', max_tokens: 600 });
await refused('unknownField', { model: 'qa', temprature: 0.5 });
await refused('sandboxTools', { model: 'coder', tools: [weatherTool] });
await refused('unknownAssistant', { model: 'gpt-4o' });
const bad = new OpenAI({ baseURL: process.env.AGENTBOX_URL + '/v1', apiKey: 'wrong', maxRetries: 0 });
try {
  await bad.models.list();
} catch (e) {
  out.unauthorized = { status: e.status, name: e.constructor.name };
}

// The Responses API: whole and streamed.
const r1 = await client.responses.create({ model: 'qa', input: 'The capital of France, as a response?', instructions: 'Answer in one sentence.' });
out.response = { id: r1.id, status: r1.status, text: r1.output_text, types: r1.output.map((o) => o.type), usage: r1.usage, conversation: r1.conversation };
const rs = await client.responses.create({ model: 'claude-qa', input: [{ role: 'user', content: 'The capital of France, streamed as a response?' }], stream: true });
out.responseStream = { events: [], text: '', reasoning: '' };
for await (const ev of rs) {
  out.responseStream.events.push(ev.type);
  if (ev.type === 'response.output_text.delta') out.responseStream.text += ev.delta;
  if (ev.type === 'response.reasoning_summary_text.delta') out.responseStream.reasoning += ev.delta;
  if (ev.type === 'response.completed') out.responseStream.final = { status: ev.response.status, text: ev.response.output.filter((o) => o.type === 'message').map((o) => o.content[0].text).join('') };
}
out.responseStream.events = [...new Set(out.responseStream.events)];

// A function-calling loop over the Responses API, continued with
// previous_response_id.
const rf = await client.responses.create({ model: 'qa', input: 'What is the weather in Paris, response?', tools: [{ type: 'function', name: 'get_weather', parameters: weatherTool.function.parameters }] });
const call = rf.output.find((o) => o.type === 'function_call');
const rf2 = await client.responses.create({
  model: 'qa',
  previous_response_id: rf.id,
  input: [{ type: 'function_call_output', call_id: call.call_id, output: getWeather(JSON.parse(call.arguments)) }],
  tools: [{ type: 'function', name: 'get_weather', parameters: weatherTool.function.parameters }],
});
out.responseTools = { call: { name: call.name, arguments: JSON.parse(call.arguments), status: call.status }, answer: rf2.output_text, previous: rf2.previous_response_id, sameChat: rf2.conversation?.id === rf.conversation?.id };
// Multi-turn with a conversation id, and the stored response read back.
const c1 = await client.responses.create({ model: 'qa', conversation: 'sdk-conv-1', input: 'My name is Ada, in a conversation.' });
const c2 = await client.responses.create({ model: 'qa', conversation: { id: 'sdk-conv-1' }, input: 'What is my name?' });
out.conversation = [c1.output_text, c2.output_text, c2.conversation];
out.retrieved = (await client.responses.retrieve(c2.id)).output_text;
// Continuing from a response that is not its chat's newest forks the chat.
try {
  const b = await client.responses.create({ model: 'qa', previous_response_id: c1.id, input: 'On a branch: what is my name?' });
  out.branch = { text: b.output_text, previous: b.previous_response_id === c1.id, forked: !!b.conversation?.id && b.conversation.id !== 'sdk-conv-1' };
} catch (e) {
  out.branch = err(e);
}
const eph = await client.responses.create({ model: 'qa', input: 'The capital of France, unstored?', store: false });
try {
  await client.responses.retrieve(eph.id);
} catch (e) {
  out.unstored = err(e);
}
try {
  await client.responses.create({ model: 'qa', input: 'x', background: true });
} catch (e) {
  out.responseRefused = err(e);
}
const incomplete = await client.responses.create({ model: 'qa', input: 'Write an essay, as a response.' });
out.responseIncomplete = { status: incomplete.status, details: incomplete.incomplete_details };

// The sandboxed agent: its own tool activity as mcp_call items, never a
// function_call; the same text streamed or not.
const agent = await client.responses.create({ model: 'coder', input: 'Please list the files.' });
out.agent = {
  text: agent.output_text,
  items: agent.output.map((o) => (o.type === 'mcp_call' ? { type: o.type, name: o.name, arguments: JSON.parse(o.arguments), output: o.output, status: o.status, server_label: o.server_label } : { type: o.type })),
};
const agentStream = await client.chat.completions.create({ model: 'coder', stream: true, messages: [{ role: 'user', content: 'Please list the files, streamed.' }] });
out.agentChatStream = '';
for await (const chunk of agentStream) out.agentChatStream += chunk.choices[0]?.delta?.content ?? '';

console.log(JSON.stringify(out));

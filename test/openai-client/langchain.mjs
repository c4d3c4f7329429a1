// Drives LangChain's ChatOpenAI against agentbox, over Chat Completions and
// over the Responses API (useResponsesApi). Prints what it saw as one JSON
// object (langchain_test.go checks it).
//
// env: AGENTBOX_URL, AGENTBOX_TOKEN.
import { createRequire } from 'node:module';
import { ChatOpenAI } from '@langchain/openai';
import { HumanMessage, ToolMessage } from '@langchain/core/messages';
import { tool } from '@langchain/core/tools';

const require = createRequire(import.meta.url);
const version = (p) => require(`${p}/package.json`).version;
const out = { versions: { openai: version('@langchain/openai'), core: version('@langchain/core') } };

const getWeather = tool(async ({ city }) => `18C and sunny in ${city}`, {
  name: 'get_weather',
  description: 'The weather in a city',
  schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
});
const err = (e) => ({ status: e.status ?? null, code: e.code ?? null, message: e.message });

for (const [name, useResponsesApi] of [['chat', false], ['responses', true]]) {
  const model = (id, extra = {}) =>
    new ChatOpenAI({ model: id, apiKey: process.env.AGENTBOX_TOKEN, configuration: { baseURL: process.env.AGENTBOX_URL + '/v1' }, useResponsesApi, maxRetries: 0, ...extra });
  const r = {};
  // Whole and streamed.
  const whole = await model('qa').invoke('The capital of France?');
  r.invoke = { text: whole.text, finish: whole.response_metadata.finish_reason ?? whole.response_metadata.status ?? null, outputTokens: whole.usage_metadata?.output_tokens ?? null };
  let streamed = '';
  let last;
  for await (const chunk of await model('claude-qa', { streamUsage: true }).stream('The capital of France, streamed?')) {
    streamed += chunk.text;
    last = last ? last.concat(chunk) : chunk;
  }
  r.stream = { text: streamed, outputTokens: last.usage_metadata?.output_tokens ?? null };
  // A function-calling loop, on both connectors.
  for (const id of ['qa', 'claude-qa']) {
    const bound = model(id).bindTools([getWeather]);
    const messages = [new HumanMessage('What is the weather in Paris?')];
    const first = await bound.invoke(messages);
    messages.push(first);
    for (const call of first.tool_calls) messages.push(await getWeather.invoke(call));
    const second = await bound.invoke(messages);
    r[`tools_${id}`] = { calls: first.tool_calls.map((c) => ({ name: c.name, args: c.args })), answer: second.text, toolMessage: messages[2] instanceof ToolMessage };
  }
  // Multi-turn.
  const history = [new HumanMessage('My name is Ada.')];
  const t1 = await model('qa').invoke(history);
  history.push(t1, new HumanMessage('What is my name?'));
  const t2 = await model('qa').invoke(history);
  r.multiTurn = [t1.text, t2.text];
  // Errors.
  try {
    await model('gpt-4o').invoke('x');
  } catch (e) {
    r.unknown = err(e);
  }
  try {
    await model('qa', { maxTokens: 5000 }).invoke('The capital of France?');
  } catch (e) {
    r.policy = err(e);
  }
  // The sandboxed agent.
  const agent = await model('coder').invoke('Please list the files.');
  r.agent = { text: agent.text, toolOutputs: (agent.additional_kwargs.tool_outputs ?? []).map((o) => ({ type: o.type, name: o.name, output: o.output })), toolCalls: agent.tool_calls.length };
  out[name] = r;
}

console.log(JSON.stringify(out));

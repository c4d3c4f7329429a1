// Drives the AI SDK against agentbox: its default OpenAI provider (the
// Responses API) and its openai-compatible provider (Chat Completions).
// Prints what it saw as one JSON object (aisdk_test.go checks it).
//
// env: AGENTBOX_URL, AGENTBOX_TOKEN.
import { createRequire } from 'node:module';
import { createOpenAI } from '@ai-sdk/openai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { APICallError, generateText, jsonSchema, stepCountIs, streamText, tool } from 'ai';

const require = createRequire(import.meta.url);
const version = (p) => require(`${p}/package.json`).version;
const out = { versions: { ai: version('ai'), openai: version('@ai-sdk/openai'), compatible: version('@ai-sdk/openai-compatible') } };

const baseURL = process.env.AGENTBOX_URL + '/v1';
const apiKey = process.env.AGENTBOX_TOKEN;
const openai = createOpenAI({ baseURL, apiKey });
const compatible = createOpenAICompatible({ name: 'agentbox', baseURL, apiKey, includeUsage: true });

const weather = tool({
  description: 'The weather in a city',
  inputSchema: jsonSchema({ type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false }),
  execute: async ({ city }) => `18C and sunny in ${city}`,
});
const err = (e) => ({ isAPICallError: APICallError.isInstance(e), status: e.statusCode, message: e.message, data: e.data ?? null });
const summary = (r) => ({
  text: r.text,
  reasoning: r.reasoningText ?? null,
  finishReason: r.finishReason,
  outputTokens: r.usage.outputTokens,
  steps: r.steps.length,
  calls: r.steps.flatMap((s) => s.toolCalls.map((c) => ({ name: c.toolName, input: c.input, providerExecuted: c.providerExecuted ?? false }))),
});

for (const [name, provider] of [['responses', openai], ['compatible', compatible]]) {
  const r = {};
  // Whole and streamed, on both connectors.
  r.generate = summary(await generateText({ model: provider('qa'), prompt: 'The capital of France?' }));
  const s = streamText({ model: provider('claude-qa'), prompt: 'The capital of France, streamed?' });
  let streamed = '';
  for await (const part of s.textStream) streamed += part;
  r.stream = { streamed, text: await s.text, reasoning: (await s.reasoningText) ?? null, finishReason: await s.finishReason };
  // A tool loop the SDK runs itself, whole and streamed.
  r.tools = summary(await generateText({ model: provider('qa'), prompt: 'What is the weather in Paris?', tools: { get_weather: weather }, stopWhen: stepCountIs(3) }));
  const st = streamText({ model: provider('claude-qa'), prompt: 'Stream me the weather in Paris', tools: { get_weather: weather }, stopWhen: stepCountIs(3) });
  r.streamTools = { text: await st.text, steps: (await st.steps).length, finishReason: await st.finishReason };
  // Multi-turn: the conversation so far, as the SDK keeps it.
  const messages = [{ role: 'user', content: 'My name is Ada.' }];
  const t1 = await generateText({ model: provider('qa'), messages });
  messages.push(...t1.response.messages, { role: 'user', content: 'What is my name?' });
  const t2 = await generateText({ model: provider('qa'), messages });
  r.multiTurn = [t1.text, t2.text];
  // finish reason length.
  r.length = (await generateText({ model: provider('qa'), prompt: 'Write an essay.' })).finishReason;
  // Errors: an unknown assistant, an option the assistant does not allow.
  try {
    await generateText({ model: provider('gpt-4o'), prompt: 'x', maxRetries: 0 });
  } catch (e) {
    r.unknown = err(e);
  }
  try {
    await generateText({ model: provider('qa'), prompt: 'The capital of France?', maxOutputTokens: 5000, maxRetries: 0 });
  } catch (e) {
    r.policy = err(e);
  }
  // The sandboxed agent.
  const agent = await generateText({ model: provider('coder'), prompt: 'Please list the files.' });
  r.agent = { ...summary(agent), results: agent.toolResults.map((x) => ({ name: x.toolName, output: x.output })) };
  out[name] = r;
}

console.log(JSON.stringify(out));

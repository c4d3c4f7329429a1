// Drives the official openai package through tool approval: the guarded
// assistant's Bash call waits for the user; the request comes as a chunk
// (Chat Completions) or an event (Responses) in the stream, the answer
// goes to the native API, and the stream then finishes. Prints what it saw
// as one JSON object (approval_test.go checks it).
//
// env: AGENTBOX_URL, AGENTBOX_TOKEN.
import OpenAI from 'openai';

const base = process.env.AGENTBOX_URL;
const token = process.env.AGENTBOX_TOKEN;
const client = new OpenAI({ baseURL: base + '/v1', apiKey: token, maxRetries: 0 });
const out = {};

// answer posts a decision to the native API.
async function answer(chatID, id, body) {
  const r = await fetch(`${base}/api/chats/${chatID}/approvals/${id}`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: r.status, body: await r.json() };
}

// Chat Completions, streamed: allowed.
{
  const { data: stream, response } = await client.chat.completions
    .create({ model: 'guarded', stream: true, messages: [{ role: 'user', content: 'Please touch the marker.' }] }, { headers: { 'X-Chat-ID': 'sdk-approval-1' } })
    .withResponse();
  const chatID = response.headers.get('x-chat-id');
  const o = (out.chat = { chatID, content: '', finish: [], events: [] });
  for await (const chunk of stream) {
    const ev = chunk.agentbox_event;
    if (ev) {
      o.events.push(ev.type);
      if (ev.type === 'approval_requested') {
        o.requested = chunk;
        o.answer = await answer(chatID, ev.props.approval_id, { decision: 'allow' });
      } else {
        o.resolved = ev.props;
      }
    }
    for (const c of chunk.choices) {
      if (c.delta?.content) o.content += c.delta.content;
      if (c.finish_reason) o.finish.push(c.finish_reason);
    }
  }
}

// The stream helper (which accumulates the completion): denied with a
// reason.
{
  const o = (out.helper = { events: [] });
  const stream = client.chat.completions.stream(
    { model: 'guarded', messages: [{ role: 'user', content: 'Please touch the marker, with the helper.' }] },
    { headers: { 'X-Chat-ID': 'sdk-approval-2' } },
  );
  stream.on('chunk', (chunk) => {
    const ev = chunk.agentbox_event;
    if (!ev) return;
    o.events.push(ev.type);
    if (ev.type === 'approval_requested') {
      o.answered = answer('sdk-approval-2', ev.props.approval_id, { decision: 'deny', reason: 'not-today-5821' });
    } else {
      o.resolved = ev.props;
    }
  });
  const final = await stream.finalChatCompletion();
  o.answer = await o.answered;
  delete o.answered;
  o.content = final.choices[0].message.content;
  o.finish = final.choices[0].finish_reason;
}

// Responses, streamed: the request is an event of its own, not an output
// item.
{
  const o = (out.responses = { types: [], text: '' });
  const stream = await client.responses.create({ model: 'guarded', input: 'Please touch the marker, in a response.', conversation: 'sdk-approval-3', stream: true });
  for await (const ev of stream) {
    if (ev.type === 'response.output_text.delta') o.text += ev.delta;
    if (ev.type === 'response.completed') o.status = ev.response.status;
    if (!ev.type.startsWith('response.agentbox.')) continue;
    o.types.push(ev.type);
    if (ev.type === 'response.agentbox.approval_requested') {
      o.requested = ev;
      o.answer = await answer('sdk-approval-3', ev.approval_id, { decision: 'allow' });
    }
  }
}

console.log(JSON.stringify(out));

'use strict';
// The Cursor CLI stand-in: a Node.js program that takes cursor-agent's
// command line, loads its configuration the way Cursor documents it, runs
// its scripted shell calls as a real CLI runs its agent's commands (child
// processes with their own pipes) and prints the documented stream-json
// output. It stands in for the CLI only where the CLI cannot be installed
// (see README.md); script.json beside it says what it does for a prompt.
const cp = require('child_process');
const crypto = require('crypto');
const fs = require('fs');
const os = require('os');
const path = require('path');

function die(msg) {
  process.stderr.write('cursor-agent stand-in: ' + msg + '\n');
  process.exit(97);
}

const o = {print: false, format: '', workspace: process.cwd(), resume: '', approve: false, prompt: null};
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  const a = argv[i];
  switch (a) {
    case '-p': case '--print': o.print = true; break;
    case '--output-format': o.format = argv[++i]; break;
    case '--workspace': o.workspace = argv[++i]; break;
    case '--resume': o.resume = argv[++i]; break;
    case '--approve-mcps': o.approve = true; break;
    case '--model': case '-m': case '--mode': case '--sandbox': i++; break;
    case '--stream-partial-output': case '-f': case '--force': case '--trust': break;
    default:
      if (a.startsWith('-')) die('unknown option ' + a);
      if (o.prompt !== null) die('more than one prompt');
      o.prompt = a;
  }
}
if (!o.print || o.format !== 'stream-json') die('want --print --output-format stream-json');
if (!process.env.CURSOR_API_KEY) die('CURSOR_API_KEY is not set');
if (o.prompt === null) die('no prompt');
const ws = o.workspace;

const readJSON = (p) => { try { return JSON.parse(fs.readFileSync(p, 'utf8')); } catch { return null; } };
const readText = (p) => { try { return fs.readFileSync(p, 'utf8'); } catch { return null; } };
// The user's config folder: CURSOR_CONFIG_DIR, else ~/.cursor; both are
// read, as either could be the CLI's.
const globals = [...new Set([process.env.CURSOR_CONFIG_DIR, path.join(os.homedir(), '.cursor')].filter(Boolean))];
const waits = [];
const run = (command, args, opts) => {
  const c = cp.spawn(command, args, {cwd: ws, stdio: ['pipe', 'ignore', 'ignore'], ...opts});
  c.on('error', () => {});
  waits.push(new Promise((resolve) => { c.on('close', resolve); setTimeout(() => { c.kill('SIGKILL'); resolve(); }, 3000); }));
};

// MCP servers (https://cursor.com/docs/mcp): the global ones start, the
// project's (.cursor/mcp.json) once approved (--approve-mcps).
const mcp = [[path.join(ws, '.cursor', 'mcp.json'), o.approve], ...globals.map((g) => [path.join(g, 'mcp.json'), true])];
for (const [file, approved] of mcp) {
  if (!approved) continue;
  for (const s of Object.values(readJSON(file)?.mcpServers || {})) {
    if (typeof s?.command !== 'string') continue;
    const env = {...process.env};
    for (const [k, v] of Object.entries(s.env || {})) {
      env[k] = String(v).replace(/\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}/g, (_, n) => process.env[n] || '');
    }
    run(s.command, (s.args || []).map(String), {env});
  }
}
// Hooks (https://cursor.com/docs/agent/hooks): the project's and the
// user's hooks.json; every hook's command runs.
for (const file of [path.join(ws, '.cursor', 'hooks.json'), ...globals.map((g) => path.join(g, 'hooks.json'))]) {
  for (const list of Object.values(readJSON(file)?.hooks || {})) {
    for (const h of Array.isArray(list) ? list : []) {
      if (typeof h?.command === 'string') run('/bin/sh', ['-c', h.command], {});
    }
  }
}
// Rules (https://cursor.com/docs/context/rules): .cursor/rules, AGENTS.md
// and CLAUDE.md of the project; they go with every request.
const instructions = [];
const walk = (dir) => {
  let entries = [];
  try { entries = fs.readdirSync(dir, {withFileTypes: true}); } catch { return; }
  for (const e of entries.sort((a, b) => a.name.localeCompare(b.name))) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) walk(p);
    else if (e.name.endsWith('.mdc')) instructions.push(readText(p) || '');
  }
};
walk(path.join(ws, '.cursor', 'rules'));
for (const f of ['AGENTS.md', 'CLAUDE.md']) {
  const text = readText(path.join(ws, f));
  if (text !== null) instructions.push(text);
}

// The chat store: CONFIG/chats/<md5 of the workspace>/<chat id>, which
// --resume reads back.
const chats = path.join(globals[0], 'chats', crypto.createHash('md5').update(ws).digest('hex'));
const chatID = o.resume || crypto.randomUUID();
const storeFile = path.join(chats, chatID, 'store.json');
let store = {messages: [], requests: []};
if (o.resume) {
  store = readJSON(storeFile);
  if (!store) die('chat ' + o.resume + ' not found');
}

// The input: the prompt, or the prompt file it points to.
let input = o.prompt;
const ref = o.prompt.match(/(\/workspace\/\S+\.md)/);
if (ref) input = readText(ref[1]) ?? die('the prompt points to ' + ref[1] + ', which is missing');
// What the model would be sent.
store.requests.push({instructions, history: store.messages.slice(), input});
store.messages.push({role: 'user', content: input});

const script = readJSON(path.join(__dirname, 'script.json')) || [];
const turn = script.find((t) => input.includes(t.when)) || {answer: 'Nothing is scripted for this.'};
const out = (e) => process.stdout.write(JSON.stringify({...e, session_id: chatID}) + '\n');
out({type: 'system', subtype: 'init', apiKeySource: 'env', cwd: ws, model: 'stand-in', permissionMode: 'default'});
out({type: 'user', message: {role: 'user', content: [{type: 'text', text: input}]}});

function shell(command) {
  return new Promise((resolve) => {
    const c = cp.spawn('/bin/bash', ['-c', command], {cwd: ws, stdio: ['ignore', 'pipe', 'pipe']});
    let stdout = '', stderr = '';
    c.stdout.on('data', (d) => { stdout += d; });
    c.stderr.on('data', (d) => { stderr += d; });
    c.on('close', (code) => resolve({command, exitCode: code ?? 1, stdout, stderr}));
  });
}

(async () => {
  if (turn.shell) {
    const args = {command: turn.shell, workingDirectory: ws};
    out({type: 'tool_call', subtype: 'started', call_id: 'call-1', tool_call: {shellToolCall: {args}}});
    const result = await shell(turn.shell);
    out({type: 'tool_call', subtype: 'completed', call_id: 'call-1', tool_call: {shellToolCall: {args, result: {success: result}}}});
    store.messages.push({role: 'tool', content: result.stdout});
  }
  out({type: 'assistant', message: {role: 'assistant', content: [{type: 'text', text: turn.answer}]}});
  store.messages.push({role: 'assistant', content: turn.answer});
  await Promise.all(waits);
  fs.mkdirSync(path.dirname(storeFile), {recursive: true});
  fs.writeFileSync(storeFile, JSON.stringify(store, null, 2));
  out({type: 'result', subtype: 'success', is_error: false, duration_ms: 1, result: turn.answer});
})();

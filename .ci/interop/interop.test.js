// Interop tests: corral driven by the official MCP TypeScript SDK client, with
// real reference servers from npm (server-everything, server-filesystem) and
// the fakeserver as its children.
//
//   cd .ci/interop && npm ci && CORRAL_BIN=/path/to/corral node --test
//
// CORRAL_BIN and FAKESERVER_BIN name the binaries; either one that is unset is
// built from the repository with `go build`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import {
  CreateMessageRequestSchema, ElicitRequestSchema, ListRootsRequestSchema,
  LoggingMessageNotificationSchema, ResourceUpdatedNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { alive, CORRAL, descendants, entry, fakeserver, freePort, listening, spawnCorral, stop } from './harness.js';

const HELLO = 'hello from the corral interop test\n';
const EXPECTED = ['everything__echo', 'fake__echo', 'get-sum', 'whoami', 'list_directory'];
const FAKE = fakeserver();

// setup writes a temp dir with files/hello.txt and a config; returns their paths.
function setup(t, port) {
  const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'corral-interop-')));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const files = path.join(dir, 'files');
  fs.mkdirSync(files);
  fs.writeFileSync(path.join(files, 'hello.txt'), HELLO);
  const cfg = path.join(dir, 'corral.json');
  fs.writeFileSync(cfg, JSON.stringify({
    ...(port && { listen: `127.0.0.1:${port}` }),
    mcpServers: {
      everything: { command: process.execPath, args: [entry('@modelcontextprotocol/server-everything'), 'stdio'] },
      filesystem: { command: process.execPath, args: [entry('@modelcontextprotocol/server-filesystem'), files] },
      fake: { command: FAKE, args: ['-name', 'fake'] },
    },
  }, null, 2));
  return { cfg, hello: path.join(files, 'hello.txt') };
}

// Process helpers (ps works on Linux and macOS). A zombie counts as gone.
// track makes sure that child and every descendant seen is dead after the test.
function track(t, child) {
  const pids = new Set();
  t.after(async () => {
    await stop(child, 5000); // graceful first, so that corral reaps its children
    for (const pid of pids) if (alive(pid)) try { process.kill(pid, 'SIGKILL'); } catch {}
  });
  return { note: () => { for (const pid of descendants(child.pid)) pids.add(pid); } };
}

// startHTTP runs corral over HTTP and resolves once it listens.
async function startHTTP(t, cfg, args = []) {
  const proc = spawnCorral(cfg, args);
  Object.assign(proc, track(t, proc.child));
  await listening(proc);
  return proc;
}

// withLog adds corral's stderr to any failure of fn.
async function withLog(proc, fn) {
  try { return await fn(); } catch (e) { e.message += `\n--- corral stderr ---\n${proc.log}`; throw e; }
}

// waitTools lists tools until every expected name is there (servers start in the background).
async function waitTools(client) {
  const deadline = Date.now() + 20000;
  for (;;) {
    const names = (await client.listTools()).tools.map((x) => x.name);
    if (EXPECTED.every((n) => names.includes(n)) || Date.now() > deadline) return names;
    await sleep(100);
  }
}

const text = (res) => { assert.ok(!res.isError, `tool error: ${JSON.stringify(res)}`); return res.content.map((c) => c.text).join(''); };

// exercise checks the tool list and calls one tool of each server.
async function exercise(client, hello) {
  const names = await waitTools(client);
  for (const n of EXPECTED) assert.ok(names.includes(n), `${n} missing from ${names}`);
  assert.ok(!names.includes('echo'), 'colliding "echo" passed through unqualified');
  const read = names.includes('read_text_file') ? 'read_text_file' : 'read_file';
  assert.ok(names.includes(read), `no read tool in ${names}`);
  assert.equal(text(await client.callTool({ name: read, arguments: { path: hello } })), HELLO);
  assert.equal(text(await client.callTool({ name: 'everything__echo', arguments: { message: 'ping ✓' } })), 'Echo: ping ✓');
  assert.match(text(await client.callTool({ name: 'get-sum', arguments: { a: 2, b: 40 } })), /\b42\b/);
  assert.equal(text(await client.callTool({ name: 'fake__echo', arguments: { text: 'über' } })), 'über');
  const who = JSON.parse(text(await client.callTool({ name: 'whoami', arguments: {} })));
  assert.equal(who.name, 'fake');
  return who.pid;
}

async function httpClient(t, port) {
  const client = new Client({ name: 'corral-interop', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`)));
  t.after(() => client.close().catch(() => {}));
  return client;
}

test('Streamable HTTP: two SDK clients list and call tools of all three servers', async (t) => {
  const port = await freePort();
  const { cfg, hello } = setup(t, port);
  const proc = await startHTTP(t, cfg);
  await withLog(proc, async () => {
    const [a, b] = await Promise.all([httpClient(t, port), httpClient(t, port)]);
    assert.notEqual(a.transport.sessionId, b.transport.sessionId);
    assert.equal(a.getServerVersion().name, 'corral');
    const [pidA, pidB] = await Promise.all([exercise(a, hello), exercise(b, hello)]);
    assert.equal(pidA, pidB, 'both sessions share one fakeserver');
    proc.note();
    await Promise.all([a.close(), b.close()]);
    const r = await stop(proc.child);
    assert.deepEqual([r.code, r.signal], [0, null]);
  });
});

test('stdio: StdioClientTransport runs corral -stdio; close() ends corral and its children', async (t) => {
  const { cfg, hello } = setup(t);
  const transport = new StdioClientTransport({ command: CORRAL, args: ['-stdio', '-config', cfg], stderr: 'pipe' });
  const proc = { log: '' };
  transport.stderr.setEncoding('utf8');
  transport.stderr.on('data', (s) => { proc.log += s; });
  const client = new Client({ name: 'corral-interop', version: '1.0.0' });
  await client.connect(transport);
  const child = transport._process; // the SDK keeps the ChildProcess private
  Object.assign(proc, track(t, child));
  await withLog(proc, async () => {
    const fakePid = await exercise(client, hello);
    const kids = descendants(child.pid);
    assert.ok(kids.includes(fakePid), `fakeserver ${fakePid} not among corral's children ${kids}`);
    assert.equal(kids.length, 3, `children: ${kids}`);
    proc.note();
    const t0 = Date.now();
    await client.close(); // ends stdin, SIGTERM after 2 s, SIGKILL after 4 s
    assert.deepEqual([child.exitCode, child.signalCode], [0, null]);
    // Within the stop ladder's first step (stopGrace, 2 s) and the SIGTERM
    // after it: server-everything asks its client for roots 350 ms after it
    // starts, and does not exit at the end of its stdin while it waits for
    // that answer (it does the same with the SDK client connected directly),
    // so when this test is quick corral's SIGTERM ends it.
    assert.ok(Date.now() - t0 < 3500, `corral took ${Date.now() - t0} ms to exit after end of stdin`);
    assert.deepEqual(kids.filter(alive), [], 'children left running');
  });
});

test('SIGTERM with a live session: corral exits 0 within 15 s and stops its children', async (t) => {
  const port = await freePort();
  const { cfg, hello } = setup(t, port);
  const proc = await startHTTP(t, cfg);
  await withLog(proc, async () => {
    const client = await httpClient(t, port); // keeps its session and GET stream open
    await exercise(client, hello);
    const kids = descendants(proc.child.pid);
    proc.note();
    assert.equal(kids.length, 3, `children: ${kids}`);
    const r = await stop(proc.child);
    assert.deepEqual([r.code, r.signal], [0, null], `exit after ${r.ms} ms`);
    assert.ok(r.ms < 15000);
    assert.deepEqual(kids.filter(alive), [], 'children left running');
    t.diagnostic(`corral exited ${r.ms} ms after SIGTERM`);
  });
});

// ---------------------------------------------------------------------------
// Everything besides tools, with server-everything (and the fakeserver) behind
// corral: progress, logging, resources, prompts, completion, subscriptions, and
// the server's requests to the client (sampling, elicitation, roots).
//
// server-everything runs one MCP session on its stdin, so corral's sessions
// share its state: a toggle (simulated logging or resource updates) is on for
// all of them, and its subscription set is the union of theirs. Every subtest
// turns off what it turned on.

const EVERYTHING = entry('@modelcontextprotocol/server-everything');
const EVERYTHING_DOCS = path.join(path.dirname(EVERYTHING), 'docs');
const LEVELS = ['debug', 'info', 'notice', 'warning', 'error', 'critical', 'alert', 'emergency'];
const dynamicText = (n) => `demo://resource/dynamic/text/${n}`;

// featureSetup writes a config with server-everything and the fakeserver.
function featureSetup(t, port) {
  const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'corral-interop-')));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const cfg = path.join(dir, 'corral.json');
  fs.writeFileSync(cfg, JSON.stringify({
    ...(port && { listen: `127.0.0.1:${port}` }),
    mcpServers: {
      everything: { command: process.execPath, args: [EVERYTHING, 'stdio'] },
      fake: { command: FAKE, args: ['-name', 'fake'] },
    },
  }, null, 2));
  return cfg;
}

// notifications records the notifications of one kind a client gets.
// until(pred) resolves, once one matching pred has arrived, with every one
// received up to and including it, in order.
function notifications(client, schema) {
  const got = [], waiters = new Set();
  client.setNotificationHandler(schema, (n) => {
    got.push(n.params);
    for (const w of waiters) if (w.pred(n.params)) w.done(got.slice());
  });
  return {
    got,
    until(pred, what, ms = 10000) {
      const i = got.findIndex(pred);
      if (i >= 0) return Promise.resolve(got.slice(0, i + 1));
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          waiters.delete(w);
          reject(new Error(`no ${what} within ${ms} ms; got ${JSON.stringify(got)}`));
        }, ms);
        const w = { pred, done: (v) => { clearTimeout(timer); waiters.delete(w); resolve(v); } };
        waiters.add(w);
      });
    },
  };
}

const SAMPLED = 'Sampled text from the interop test client';
const ELICITED = { name: 'Ada Lovelace', check: true, email: 'ada@example.com', integer: 7 };

// featureClient is an SDK client that declares sampling, elicitation and roots
// and answers them, recording the requests it gets.
function featureClient(name, capabilities = { sampling: {}, elicitation: {}, roots: {} }) {
  const client = new Client({ name, version: '1.0.0' }, { capabilities });
  client.interopName = name;
  client.declared = capabilities;
  client.requests = { sampling: [], elicitation: [], roots: 0 };
  client.setRequestHandler(CreateMessageRequestSchema, async (req) => {
    client.requests.sampling.push(req.params);
    return { model: 'interop-model', role: 'assistant', content: { type: 'text', text: `${SAMPLED} (${name})` } };
  });
  client.setRequestHandler(ElicitRequestSchema, async (req) => {
    client.requests.elicitation.push(req.params);
    return { action: 'accept', content: ELICITED };
  });
  if (capabilities.roots) client.setRequestHandler(ListRootsRequestSchema, async () => {
    client.requests.roots++;
    return { roots: [{ uri: 'file:///interop', name }] };
  });
  client.logs = notifications(client, LoggingMessageNotificationSchema);
  client.updates = notifications(client, ResourceUpdatedNotificationSchema);
  return client;
}

async function featureHTTPClient(t, port, name) {
  const client = featureClient(name);
  await client.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`)));
  t.after(() => client.close().catch(() => {}));
  return client;
}

// reference is what server-everything shows the same SDK client connected to
// it directly, without corral (computed once). This client declares no roots:
// server-everything asks a client that does for its roots 350 ms after
// initialize, and a client gone by then leaves it waiting, not exiting.
let referenceP;
function reference() {
  referenceP ??= (async () => {
    const transport = new StdioClientTransport({ command: process.execPath, args: [EVERYTHING, 'stdio'], stderr: 'ignore' });
    const client = featureClient('direct', { sampling: {}, elicitation: {} });
    await client.connect(transport);
    const pid = transport.pid;
    try {
      return {
        tools: (await client.listTools()).tools.map((x) => x.name),
        resources: (await client.listResources()).resources,
        templates: (await client.listResourceTemplates()).resourceTemplates,
        prompts: (await client.listPrompts()).prompts,
      };
    } finally {
      await client.close();
      assert.ok(!alive(pid), `server-everything ${pid}, run directly, still runs`);
    }
  })();
  return referenceP;
}

const byKey = (k) => (a, b) => (a[k] < b[k] ? -1 : a[k] > b[k] ? 1 : 0);

// longRun calls trigger-long-running-operation with a progress callback and
// checks that the progress of its steps arrived, in order, with their total.
// The server sends the last step's progress right before its answer, and when
// the two arrive in one read the SDK client can lose that progress: it runs
// notification handlers a microtask later than it settles a request, and
// forgets the request's progress callback when it settles. The same happens
// with server-everything connected directly, so the last step may be missing.
async function longRun(client, steps, duration) {
  const progress = [];
  const res = await client.callTool({ name: 'trigger-long-running-operation', arguments: { duration, steps } },
    undefined, { onprogress: (p) => progress.push(p) });
  assert.equal(text(res), `Long running operation completed. Duration: ${duration} seconds, Steps: ${steps}.`);
  const want = Array.from({ length: steps }, (_, i) => ({ progress: i + 1, total: steps }));
  assert.ok(progress.length >= steps - 1, `progress: ${JSON.stringify(progress)}`);
  assert.deepEqual(progress, want.slice(0, progress.length));
}

// toggle calls one of server-everything's toggles and checks it went the expected way.
async function toggle(client, tool, on) {
  assert.match(text(await client.callTool({ name: tool, arguments: {} })), on ? /^Started simulated/ : /^Stopped simulated/);
}

// simulatedLog turns server-everything's simulated logging on (it sends one
// message at once, at a random level, then one every 5 s) and off again, and
// checks the first message reached client tagged with the server's name.
async function simulatedLog(client) {
  const isSimulated = (m) => /level.message/.test(m.data);
  await toggle(client, 'toggle-simulated-logging', true);
  try {
    const got = await client.logs.until(isSimulated, 'simulated log message');
    const m = got.at(-1);
    assert.equal(m.logger, 'everything', `logger of ${JSON.stringify(m)}`);
    assert.ok(LEVELS.includes(m.level), `level of ${JSON.stringify(m)}`);
  } finally {
    await toggle(client, 'toggle-simulated-logging', false);
  }
}

// subscribeLog subscribes to uri, which makes server-everything log an info
// message about it, and checks that message reached client.
async function subscribeLog(client, uri) {
  assert.deepEqual(await client.subscribeResource({ uri }), {});
  const want = `Received Subscribe Resource request for URI: ${uri}`;
  const got = await client.logs.until((m) => m.data?.startsWith?.(want), `log message "${want}"`);
  assert.deepEqual(got.at(-1), { level: 'info', logger: 'everything', data: `${want} ` });
}

// browse lists and reads server-everything's resources, resource templates
// and prompts through client, and completes their arguments.
async function browse(client) {
  const ref = await reference();
  const demo = (xs, k) => xs.filter((x) => x[k].startsWith('demo://')).sort(byKey(k));

  const resources = (await client.listResources()).resources;
  assert.deepEqual(demo(resources, 'uri'), demo(ref.resources, 'uri'), 'resources differ from what server-everything lists directly');
  assert.ok(resources.some((r) => r.uri === 'fake://fake/hello'), 'the fakeserver\'s resources are listed too');
  const templates = (await client.listResourceTemplates()).resourceTemplates;
  assert.deepEqual(demo(templates, 'uriTemplate'), demo(ref.templates, 'uriTemplate'), 'resource templates differ');
  assert.ok(templates.some((r) => r.uriTemplate === dynamicText('{resourceId}')));

  const doc = 'demo://resource/static/document/instructions.md';
  assert.deepEqual(await client.readResource({ uri: doc }), { contents: [
    { uri: doc, mimeType: 'text/markdown', text: fs.readFileSync(path.join(EVERYTHING_DOCS, 'instructions.md'), 'utf8') },
  ] });
  const [txt] = (await client.readResource({ uri: dynamicText(7) })).contents;
  assert.equal(txt.uri, dynamicText(7));
  assert.match(txt.text, /^Resource 7: This is a plaintext resource created at /);
  const [blob] = (await client.readResource({ uri: 'demo://resource/dynamic/blob/3' })).contents;
  assert.match(Buffer.from(blob.blob, 'base64').toString(), /^Resource 3: This is a base64 blob created at /);
  await assert.rejects(client.readResource({ uri: dynamicText(0) }),
    (e) => e.code === -32603 && e.message.includes(`Unknown resource: ${dynamicText(0)}`));
  assert.deepEqual(await client.readResource({ uri: 'fake://fake/hello' }),
    { contents: [{ uri: 'fake://fake/hello', mimeType: 'text/plain', text: 'hello from fake' }] });

  const prompts = (await client.listPrompts()).prompts;
  const names = new Set(ref.prompts.map((p) => p.name));
  assert.deepEqual(prompts.filter((p) => names.has(p.name)).sort(byKey('name')), ref.prompts.slice().sort(byKey('name')), 'prompts differ');
  assert.deepEqual([...names].sort(), ['args-prompt', 'completable-prompt', 'resource-prompt', 'simple-prompt']);
  assert.deepEqual((await client.getPrompt({ name: 'simple-prompt' })).messages,
    [{ role: 'user', content: { type: 'text', text: 'This is a simple prompt without arguments.' } }]);
  assert.deepEqual((await client.getPrompt({ name: 'args-prompt', arguments: { city: 'Oslo', state: 'Norway' } })).messages,
    [{ role: 'user', content: { type: 'text', text: "What's weather in Oslo, Norway?" } }]);
  const embedded = (await client.getPrompt({ name: 'resource-prompt', arguments: { resourceType: 'Text', resourceId: '5' } })).messages;
  assert.equal(embedded[1].content.type, 'resource');
  assert.equal(embedded[1].content.resource.uri, dynamicText(5));

  const complete = async (ref, name, value, context) =>
    (await client.complete({ ref, argument: { name, value }, ...(context && { context: { arguments: context } }) })).completion;
  const teams = { type: 'ref/prompt', name: 'completable-prompt' };
  assert.deepEqual(await complete(teams, 'department', 'S'), { values: ['Sales', 'Support'], total: 2, hasMore: false });
  assert.deepEqual(await complete(teams, 'name', '', { department: 'Engineering' }), { values: ['Alice', 'Bob', 'Charlie'], total: 3, hasMore: false });
  assert.deepEqual((await complete({ type: 'ref/prompt', name: 'resource-prompt' }, 'resourceType', 'B')).values, ['Blob']);
  assert.deepEqual((await complete({ type: 'ref/resource', uri: dynamicText('{resourceId}') }, 'resourceId', '12')).values, ['12']);
}

// samplingRoundTrip calls server-everything's trigger-sampling-request, whose
// sampling/createMessage client must answer.
async function samplingRoundTrip(client) {
  await requireConditionalTool(client, 'trigger-sampling-request', 'sampling');
  const before = client.requests.sampling.length;
  const out = text(await client.callTool({ name: 'trigger-sampling-request', arguments: { prompt: 'Say hello', maxTokens: 20 } }));
  assert.deepEqual(client.requests.sampling.slice(before), [{
    messages: [{ role: 'user', content: { type: 'text', text: 'Resource trigger-sampling-request context: Say hello' } }],
    systemPrompt: 'You are a helpful test server.', temperature: 0.7, maxTokens: 20,
  }]);
  const result = JSON.parse(out.replace(/^LLM sampling result: \n/, ''));
  assert.deepEqual(result, { model: 'interop-model', role: 'assistant', content: { type: 'text', text: `${SAMPLED} (${client.interopName})` } });
}

// elicitationRoundTrip calls server-everything's trigger-elicitation-request,
// whose elicitation/create client must answer.
async function elicitationRoundTrip(client) {
  await requireConditionalTool(client, 'trigger-elicitation-request', 'elicitation');
  const before = client.requests.elicitation.length;
  const res = await client.callTool({ name: 'trigger-elicitation-request', arguments: {} });
  const [req] = client.requests.elicitation.slice(before);
  assert.equal(req?.message, 'Please provide inputs for the following fields:');
  assert.deepEqual(req.requestedSchema.required, ['name']);
  assert.equal(res.content[0].text, '✅ User provided the requested information!');
  assert.equal(res.content[1].text, 'User inputs:\n- Name: Ada Lovelace\n- Agreed to terms: true\n- Email: ada@example.com\n- Favorite Integer: 7');
}

// server-everything registers its sampling and elicitation tools only for a
// client whose initialize declared the capability; its client is corral.
async function requireConditionalTool(client, tool, capability) {
  const ref = await reference();
  assert.ok(ref.tools.includes(tool), `control: server-everything connected directly lists no ${tool}: ${ref.tools}`);
  const names = (await client.listTools()).tools.map((x) => x.name);
  assert.ok(names.includes(tool), `${tool} is not listed through corral, though server-everything lists it to an SDK client ` +
    `declaring ${capability} connected directly (this one declares ${JSON.stringify(client.declared)}). server-everything ` +
    `registers it only when its own client (corral) declares the ${capability} capability in initialize. Listed: ${names}`);
}

// fakeServerRequests has the fakeserver send sampling/createMessage,
// elicitation/create and roots/list, which corral must pass to client.
async function fakeServerRequests(client) {
  const name = client.interopName;
  assert.equal(text(await client.callTool({ name: 'sample', arguments: { prompt: 'hi from fake' } })), `sampled: ${SAMPLED} (${name})`);
  assert.deepEqual(client.requests.sampling.at(-1), { messages: [{ role: 'user', content: { type: 'text', text: 'hi from fake' } }], maxTokens: 100 });
  assert.equal(text(await client.callTool({ name: 'elicit', arguments: { message: 'who?' } })),
    `elicited: ${JSON.stringify({ action: 'accept', content: ELICITED })}`);
  const roots = client.requests.roots;
  assert.equal(text(await client.callTool({ name: 'roots', arguments: {} })), `roots: ${JSON.stringify([{ uri: 'file:///interop', name }])}`);
  assert.equal(client.requests.roots, roots + 1);
}

test('Streamable HTTP: progress, logging, resources, prompts, completion, subscriptions, sampling, elicitation of server-everything', async (t) => {
  const port = await freePort();
  const cfg = featureSetup(t, port);
  reference().catch(() => {}); // in the background; browse and sampling wait for it
  const proc = await startHTTP(t, cfg, ['-log-level', 'debug']);
  const [a, b] = await Promise.all([featureHTTPClient(t, port, 'client-a'), featureHTTPClient(t, port, 'client-b')]);
  const sub = (name, fn) => t.test(name, () => withLog(proc, fn));

  await sub('progress: two sessions run trigger-long-running-operation at once, each gets its own notifications/progress', async () => {
    await Promise.all([longRun(a, 3, 0.6), longRun(b, 4, 0.8)]);
  });

  await sub('logging: each session gets the log messages at or above its own level, tagged "everything"', async () => {
    assert.deepEqual(await a.setLoggingLevel('debug'), {});
    assert.deepEqual(await b.setLoggingLevel('error'), {});
    await simulatedLog(a);
    await subscribeLog(a, dynamicText(100)); // an info message; b must not get it
    // The fakeserver's error message is b's barrier: what b was to get before it, it has.
    assert.equal(text(await b.callTool({ name: 'log', arguments: { level: 'error', data: 'barrier for b' } })), 'logged');
    const got = await b.logs.until((m) => m.data === 'barrier for b', 'the fakeserver\'s log message');
    assert.deepEqual(got.at(-1), { level: 'error', logger: 'fake/fake', data: 'barrier for b' });
    assert.deepEqual(got.filter((m) => LEVELS.indexOf(m.level) < LEVELS.indexOf('error')), [], 'messages below b\'s level "error" reached b');
    await a.logs.until((m) => m.data === 'barrier for b', 'the fakeserver\'s log message at a');
    assert.deepEqual(await a.unsubscribeResource({ uri: dynamicText(100) }), {});
  });

  await sub('resources, templates and prompts pass through unchanged; reads, gets and completions work', async () => {
    await browse(a);
  });

  await sub('subscriptions: notifications/resources/updated reaches exactly the sessions subscribed', async () => {
    const [u1, u2, u3, u4] = [1, 2, 3, 4].map(dynamicText);
    for (const [c, u] of [[a, u1], [b, u1], [b, u2], [a, u3], [b, u4]]) assert.deepEqual(await c.subscribeResource({ uri: u }), {});
    // b still holds u1, so it must stay subscribed at the server.
    assert.deepEqual(await a.unsubscribeResource({ uri: u1 }), {});
    // The toggle sends, at once, one update for each URI the server has subscribed, in the order subscribed.
    await toggle(b, 'toggle-subscriber-updates', true);
    try {
      const [gotA, gotB] = await Promise.all([
        a.updates.until((n) => n.uri === u3, `an update of ${u3} at a`),
        b.updates.until((n) => n.uri === u4, `an update of ${u4} at b`),
      ]);
      assert.deepEqual(gotA, [{ uri: u3 }], 'updates at a');
      assert.deepEqual(gotB, [{ uri: u1 }, { uri: u2 }, { uri: u4 }], 'updates at b');
    } finally {
      await toggle(b, 'toggle-subscriber-updates', false);
    }
    for (const [c, u] of [[b, u1], [b, u2], [a, u3], [b, u4]]) assert.deepEqual(await c.unsubscribeResource({ uri: u }), {});
  });

  await sub('server requests: the fakeserver\'s sampling, elicitation and roots requests reach the SDK client', async () => {
    await fakeServerRequests(a);
    await fakeServerRequests(b);
  });

  await sub('server requests: refused for a client without the capability, and while two sessions have calls in flight', async () => {
    const plain = await httpClient(t, port); // declares no capabilities
    const res = await plain.callTool({ name: 'sample', arguments: {} });
    assert.ok(res.isError, JSON.stringify(res));
    assert.match(res.content[0].text, /^sampling failed: -32601 .*sampling/);
    await plain.close();
    // a's call is in flight at the fakeserver once its first progress is in.
    let inFlight;
    const first = new Promise((resolve) => { inFlight = resolve; });
    const slow = a.callTool({ name: 'progress', arguments: { steps: 2, delay_ms: 300 } }, undefined, { onprogress: inFlight });
    await first;
    const refused = await b.callTool({ name: 'sample', arguments: {} });
    assert.ok(refused.isError, JSON.stringify(refused));
    assert.match(refused.content[0].text, /^sampling failed: -32603 .*in flight/);
    assert.equal(text(await slow), 'done 2');
    assert.equal(b.requests.sampling.length + a.requests.sampling.length, 2, 'only fakeServerRequests\' sampling requests reached the clients');
  });

  await sub('sampling: trigger-sampling-request round trip through the SDK client\'s handler', async () => {
    await samplingRoundTrip(a);
  });

  await sub('elicitation: trigger-elicitation-request round trip through the SDK client\'s handler', async () => {
    await elicitationRoundTrip(b);
  });

  await withLog(proc, async () => {
    proc.note();
    const kids = descendants(proc.child.pid);
    assert.equal(kids.length, 2, `children: ${kids}`);
    await Promise.all([a.close(), b.close()]);
    const r = await stop(proc.child);
    assert.deepEqual([r.code, r.signal], [0, null]);
    assert.deepEqual(kids.filter(alive), [], 'children left running');
  });
});

test('stdio: progress, logging, resources, prompts, completion, subscriptions, sampling of server-everything', async (t) => {
  const cfg = featureSetup(t);
  const transport = new StdioClientTransport({ command: CORRAL, args: ['-stdio', '-config', cfg, '-log-level', 'debug'], stderr: 'pipe' });
  const proc = { log: '' };
  transport.stderr.setEncoding('utf8');
  transport.stderr.on('data', (s) => { proc.log += s; });
  const client = featureClient('client-stdio');
  await client.connect(transport);
  const child = transport._process; // the SDK keeps the ChildProcess private
  Object.assign(proc, track(t, child));
  const sub = (name, fn) => t.test(name, () => withLog(proc, fn));

  await sub('progress: trigger-long-running-operation sends notifications/progress', async () => {
    await longRun(client, 3, 0.6);
  });

  await sub('logging: log messages after logging/setLevel, tagged "everything"', async () => {
    assert.deepEqual(await client.setLoggingLevel('debug'), {});
    await simulatedLog(client);
    await subscribeLog(client, dynamicText(200));
    assert.deepEqual(await client.unsubscribeResource({ uri: dynamicText(200) }), {});
  });

  await sub('resources, templates and prompts pass through unchanged; reads, gets and completions work', async () => {
    await browse(client);
  });

  await sub('subscriptions: notifications/resources/updated for a subscribed resource', async () => {
    const u = dynamicText(201);
    assert.deepEqual(await client.subscribeResource({ uri: u }), {});
    await toggle(client, 'toggle-subscriber-updates', true);
    try {
      assert.deepEqual(await client.updates.until((n) => n.uri === u, `an update of ${u}`), [{ uri: u }]);
    } finally {
      await toggle(client, 'toggle-subscriber-updates', false);
    }
    assert.deepEqual(await client.unsubscribeResource({ uri: u }), {});
  });

  await sub('server requests: the fakeserver\'s sampling, elicitation and roots requests reach the SDK client', async () => {
    await fakeServerRequests(client);
  });

  await sub('sampling: trigger-sampling-request round trip through the SDK client\'s handler', async () => {
    await samplingRoundTrip(client);
  });

  await withLog(proc, async () => {
    const kids = descendants(child.pid);
    assert.equal(kids.length, 2, `children: ${kids}`);
    proc.note();
    await client.close();
    assert.deepEqual([child.exitCode, child.signalCode], [0, null]);
    assert.deepEqual(kids.filter(alive), [], 'children left running');
  });
});

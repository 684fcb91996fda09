// Interop tests of what corral renames inside results, with the official
// MCP TypeScript SDK client and server-everything behind a prefix: task IDs
// (a task-augmented tools/call, polled and collected by the SDK's own task
// client) and the URIs of resource links, which the client must be able to
// read back.
//
//   cd .ci/interop && npm ci && CORRAL_BIN=/path/to/corral FAKESERVER_BIN=... node --test tasks.test.js
//
// CORRAL_BIN and FAKESERVER_BIN name the binaries; either one that is unset
// is built from the repository with `go build`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const require = createRequire(import.meta.url);
const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

let buildDir;
function binary(envName, pkg) {
  if (process.env[envName]) return path.resolve(process.env[envName]);
  buildDir ??= fs.mkdtempSync(path.join(os.tmpdir(), 'corral-interop-bin-'));
  const out = path.join(buildDir, path.basename(pkg === '.' ? 'corral' : pkg));
  if (!fs.existsSync(out)) execFileSync('go', ['build', '-o', out, pkg], { cwd: REPO, stdio: 'inherit' });
  return out;
}
const CORRAL = binary('CORRAL_BIN', '.');
const FAKE = binary('FAKESERVER_BIN', './fakeserver');
process.on('exit', () => buildDir && fs.rmSync(buildDir, { recursive: true, force: true }));

function entry(name) {
  const pj = require.resolve(`${name}/package.json`);
  const { bin } = JSON.parse(fs.readFileSync(pj, 'utf8'));
  return path.join(path.dirname(pj), typeof bin === 'string' ? bin : Object.values(bin)[0]);
}

const freePort = () => new Promise((resolve, reject) => {
  const srv = net.createServer().on('error', reject);
  srv.listen(0, '127.0.0.1', () => { const { port } = srv.address(); srv.close(() => resolve(port)); });
});

// stop sends SIGTERM and waits up to ms for the exit; SIGKILL after that.
async function stop(child, ms = 15000) {
  if (child.exitCode !== null || child.signalCode !== null) return [child.exitCode, child.signalCode];
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  const r = await Promise.race([exited, sleep(ms, null, { ref: false })]);
  if (r) return r;
  child.kill('SIGKILL');
  return exited;
}

// startCorral runs corral over HTTP with server-everything (prefix ev) and
// fakeserver (tasks declared) behind it, and resolves once it listens; the
// test's end stops it, and with it its servers.
async function startCorral(t) {
  const port = await freePort();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'corral-interop-tasks-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const cfg = path.join(dir, 'corral.json');
  fs.writeFileSync(cfg, JSON.stringify({
    listen: `127.0.0.1:${port}`,
    mcpServers: {
      everything: { command: process.execPath, args: [entry('@modelcontextprotocol/server-everything'), 'stdio'], prefix: 'ev' },
      fake: { command: FAKE, args: ['-name', 'fake', '-capabilities', 'tools,resources,tasks'] },
    },
  }));
  const child = spawn(CORRAL, ['-config', cfg], { stdio: ['ignore', 'ignore', 'pipe'] });
  const proc = { child, log: '' };
  t.after(async () => {
    const [code, signal] = await stop(child);
    assert.deepEqual([code, signal], [0, null], `corral's exit\n${proc.log}`);
  });
  child.stderr.setEncoding('utf8');
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`corral not listening after 10 s:\n${proc.log}`)), 10000);
    child.stderr.on('data', (s) => { proc.log += s; if (/serving MCP over Streamable HTTP/.test(proc.log)) { clearTimeout(timer); resolve(); } });
    child.on('exit', (code) => { clearTimeout(timer); reject(new Error(`corral exited with ${code}:\n${proc.log}`)); });
  });
  const client = new Client({ name: 'corral-interop-tasks', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`)));
  t.after(() => client.close().catch(() => {}));
  // Servers start in the background: wait until both list their tools.
  for (const deadline = Date.now() + 20000; ;) {
    const names = (await client.listTools()).tools.map((x) => x.name);
    if (['ev__simulate-research-query', 'ev__get-resource-links', 'task'].every((n) => names.includes(n))) break;
    if (Date.now() > deadline) throw new Error(`tools never listed: ${names}\n${proc.log}`);
    await sleep(100);
  }
  return { client, proc };
}

async function withLog(proc, fn) {
  try { return await fn(); } catch (e) { e.message += `\n--- corral stderr ---\n${proc.log}`; throw e; }
}

// runTask calls a tool as a task with the SDK's task client and returns
// what the stream yielded.
async function runTask(client, name, args) {
  const seen = [];
  for await (const m of client.experimental.tasks.callToolStream({ name, arguments: args }, undefined, { task: { ttl: 60000 } })) {
    seen.push(m);
  }
  return seen;
}

test('tasks: the SDK client runs task-augmented calls through corral and collects their results', async (t) => {
  const { client, proc } = await startCorral(t);
  await withLog(proc, async () => {
    assert.ok(client.getServerCapabilities().tasks?.requests?.tools?.call, `corral declares no task-augmented tools/call: ${JSON.stringify(client.getServerCapabilities())}`);
    const [research, fake] = await Promise.all([
      runTask(client, 'ev__simulate-research-query', { topic: 'corral' }),
      runTask(client, 'task', { ms: 300 }),
    ]);
    const ids = [];
    for (const [seen, want] of [[research, /Research Report: corral/], [fake, /task done 300/]]) {
      const types = seen.map((m) => m.type);
      assert.equal(types[0], 'taskCreated', `stream: ${JSON.stringify(seen)}`);
      assert.equal(types.at(-1), 'result', `stream: ${JSON.stringify(seen)}`);
      assert.match(seen.at(-1).result.content[0].text, want);
      ids.push(seen[0].task.taskId);
    }
    assert.notEqual(ids[0], ids[1]);
    // Both are this session's, completed, under the IDs the client was given.
    const { tasks } = await client.experimental.tasks.listTasks();
    assert.deepEqual(tasks.map((x) => [x.taskId, x.status]).sort(), ids.map((id) => [id, 'completed']).sort());
    // Another session sees none of them, and cannot reach them.
    const other = new Client({ name: 'corral-interop-other', version: '1.0.0' });
    await other.connect(new StreamableHTTPClientTransport(client.transport._url));
    t.after(() => other.close().catch(() => {}));
    assert.deepEqual((await other.experimental.tasks.listTasks()).tasks, []);
    await assert.rejects(other.experimental.tasks.getTask(ids[0]), /unknown task/);
  });
});

test('tasks: a task that asks the client for input names itself by the ID the client was given', async (t) => {
  const { client, proc } = await startCorral(t);
  await withLog(proc, async () => {
    const asked = new Client({ name: 'corral-interop-elicit', version: '1.0.0' }, { capabilities: { elicitation: {} } });
    const requests = [];
    asked.setRequestHandler(ElicitRequestSchema, (req) => {
      requests.push(req.params);
      return { action: 'accept', content: { interpretation: 'snake' } };
    });
    await asked.connect(new StreamableHTTPClientTransport(client.transport._url));
    t.after(() => asked.close().catch(() => {}));
    await asked.listTools();
    const seen = await runTask(asked, 'ev__simulate-research-query', { topic: 'python', ambiguous: true });
    assert.equal(seen[0].type, 'taskCreated', `stream: ${JSON.stringify(seen)}`);
    assert.equal(seen.at(-1).type, 'result', `stream: ${JSON.stringify(seen)}`);
    assert.match(seen.at(-1).result.content[0].text, /Clarification\*\*: snake/);
    assert.equal(requests.length, 1, JSON.stringify(requests));
    assert.equal(requests[0]._meta?.['io.modelcontextprotocol/related-task']?.taskId, seen[0].task.taskId);
  });
});

test('resource links: every URI a prefixed server links to reads back through corral', async (t) => {
  const { client, proc } = await startCorral(t);
  await withLog(proc, async () => {
    const res = await client.callTool({ name: 'ev__get-resource-links', arguments: { count: 4 } });
    const links = res.content.filter((c) => c.type === 'resource_link');
    assert.equal(links.length, 4, JSON.stringify(res));
    for (const link of links) {
      assert.match(link.uri, /^ev\+demo:\/\//, `a link of the server behind prefix ev: ${link.uri}`);
      const { contents } = await client.readResource({ uri: link.uri });
      assert.equal(contents.length, 1);
      assert.equal(contents[0].uri, link.uri, 'the contents come under the URI read');
    }
  });
});

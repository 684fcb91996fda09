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
import { setTimeout as sleep } from 'node:timers/promises';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { entry, fakeserver, freePort, listening, spawnCorral, stop, writeConfig } from './harness.js';

const FAKE = fakeserver();

async function startCorral(t) {
  const port = await freePort();
  const cfg = writeConfig(t, 'corral-interop-tasks-', {
    listen: `127.0.0.1:${port}`,
    mcpServers: {
      everything: { command: process.execPath, args: [entry('@modelcontextprotocol/server-everything'), 'stdio'], prefix: 'ev' },
      fake: { command: FAKE, args: ['-name', 'fake', '-capabilities', 'tools,resources,tasks'] },
    },
  });
  const proc = spawnCorral(cfg);
  t.after(async () => {
    const { code, signal } = await stop(proc.child);
    assert.deepEqual([code, signal], [0, null], `corral's exit\n${proc.log}`);
  });
  await listening(proc);
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

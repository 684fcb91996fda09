// Interop test of the tasks extension of MCP 2026-07-28 through corral: a
// 2026-07-28 client (raw HTTP: the official TypeScript SDK speaks 2025-11-25)
// creates, polls and cancels tasks of server-everything (a research task
// run to its end, another cancelled while it works), which speaks
// 2025-11-25 tasks and sends each task's first status before the answer that
// creates it, and of fakeserver.
//
//   cd .ci/interop && npm ci && CORRAL_BIN=/path/to/corral FAKESERVER_BIN=... node --test moderntasks.test.js
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { entry, fakeserver, freePort, listening, spawnCorral, stop, writeConfig } from './harness.js';

const FAKE = fakeserver();
const EXT = 'io.modelcontextprotocol/tasks';

// modern posts one 2026-07-28 request with the headers the version asks
// for and returns [status, answer].
async function modern(url, id, method, params, { caps = { extensions: { [EXT]: {} } }, name } = {}) {
  const body = {
    jsonrpc: '2.0', id, method,
    params: { ...params, _meta: { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': caps, 'io.modelcontextprotocol/clientInfo': { name: 'interop-modern', version: '1' } } },
  };
  const headers = { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', 'MCP-Protocol-Version': '2026-07-28', 'Mcp-Method': method };
  if (name) headers['Mcp-Name'] = name;
  const resp = await fetch(url, { method: 'POST', headers, body: JSON.stringify(body) });
  let text = await resp.text();
  if ((resp.headers.get('content-type') || '').startsWith('text/event-stream')) {
    const datas = text.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trim());
    text = datas.map((d) => JSON.parse(d)).filter((m) => m.id === id).map((m) => JSON.stringify(m))[0];
  }
  return [resp.status, JSON.parse(text)];
}

async function pollUntilEnded(url, taskId, ids) {
  for (const deadline = Date.now() + 30000; ;) {
    const [status, m] = await modern(url, ids.next++, 'tasks/get', { taskId }, { name: taskId });
    assert.equal(status, 200, JSON.stringify(m));
    assert.equal(m.result.taskId, taskId);
    if (['completed', 'failed', 'cancelled'].includes(m.result.status)) return m.result;
    if (Date.now() > deadline) throw new Error(`task ${taskId} still ${m.result.status}`);
    await sleep(Math.min(m.result.pollIntervalMs || 100, 500));
  }
}

test('tasks extension: a 2026-07-28 client creates, polls and cancels tasks of server-everything and fakeserver through corral', async (t) => {
  const port = await freePort();
  const cfg = writeConfig(t, 'corral-interop-moderntasks-', {
    listen: `127.0.0.1:${port}`,
    mcpServers: {
      everything: { command: process.execPath, args: [entry('@modelcontextprotocol/server-everything'), 'stdio'], prefix: 'ev' },
      fake: { command: FAKE, args: ['-name', 'fake', '-capabilities', 'tools,tasks'] },
    },
  });
  const proc = spawnCorral(cfg);
  t.after(async () => {
    const { code, signal } = await stop(proc.child);
    assert.deepEqual([code, signal], [0, null], `corral's exit\n${proc.log}`);
  });
  await listening(proc);
  const url = `http://127.0.0.1:${port}/mcp`;
  const ids = { next: 1 };
  try {
    // Servers start in the background: wait until both list their tools.
    for (const deadline = Date.now() + 20000; ;) {
      const [, m] = await modern(url, ids.next++, 'tools/list', {});
      const names = (m.result?.tools || []).map((x) => x.name);
      if (['ev__simulate-research-query', 'task'].every((n) => names.includes(n))) break;
      if (Date.now() > deadline) throw new Error(`tools never listed: ${names}`);
      await sleep(100);
    }
    const [, d] = await modern(url, ids.next++, 'server/discover', {});
    assert.ok(d.result.capabilities.extensions?.[EXT], `server/discover offers no tasks extension: ${JSON.stringify(d.result.capabilities)}`);

    // server-everything's research tool runs only as a task.
    const [s1, created] = await modern(url, ids.next++, 'tools/call', { name: 'ev__simulate-research-query', arguments: { topic: 'corral' } }, { name: 'ev__simulate-research-query' });
    assert.equal(s1, 200, JSON.stringify(created));
    assert.equal(created.result.resultType, 'task', JSON.stringify(created));
    assert.match(created.result.taskId, /^[A-Za-z0-9_-]+\.[0-9a-f]{32}$/, 'corral gives the task an ID of its own: its replica, a dot, 32 hex digits');
    const done = await pollUntilEnded(url, created.result.taskId, ids);
    assert.equal(done.status, 'completed', JSON.stringify(done));
    assert.match(done.result.content[0].text, /Research Report: corral/);

    // server-everything's task, cancelled while it works: the cancel
    // reaches the server under its own ID, and the task ends cancelled.
    const [, running] = await modern(url, ids.next++, 'tools/call', { name: 'ev__simulate-research-query', arguments: { topic: 'cancel me' } }, { name: 'ev__simulate-research-query' });
    assert.equal(running.result?.resultType, 'task', JSON.stringify(running));
    const [s4, ack4] = await modern(url, ids.next++, 'tasks/cancel', { taskId: running.result.taskId }, { name: running.result.taskId });
    assert.equal(s4, 200, JSON.stringify(ack4));
    const evCancelled = await pollUntilEnded(url, running.result.taskId, ids);
    assert.equal(evCancelled.status, 'cancelled', JSON.stringify(evCancelled));

    // Without the extension, a tool that runs only as a task is refused.
    const [s2, refused] = await modern(url, ids.next++, 'tools/call', { name: 'ev__simulate-research-query', arguments: { topic: 'x' } }, { caps: {}, name: 'ev__simulate-research-query' });
    assert.equal(refused.error?.code, -32021, `${s2} ${JSON.stringify(refused)}`);

    // fakeserver's task, cancelled.
    const [, slow] = await modern(url, ids.next++, 'tools/call', { name: 'task', arguments: { ms: 60000 } }, { name: 'task' });
    assert.equal(slow.result.resultType, 'task', JSON.stringify(slow));
    const [s3, ack] = await modern(url, ids.next++, 'tasks/cancel', { taskId: slow.result.taskId }, { name: slow.result.taskId });
    assert.equal(s3, 200, JSON.stringify(ack));
    assert.deepEqual(ack.result, { resultType: 'complete' });
    const cancelled = await pollUntilEnded(url, slow.result.taskId, ids);
    assert.ok(cancelled.status === 'cancelled' || /cancelled/.test(JSON.stringify(cancelled.result)), JSON.stringify(cancelled));

    // server-everything's early statuses were held, not dropped.
    assert.doesNotMatch(proc.log, /task status of (no session's task|a task not known) dropped/);
  } catch (e) {
    e.message += `\n--- corral stderr ---\n${proc.log}`;
    throw e;
  }
});

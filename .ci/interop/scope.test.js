// Interop test of "scope": "session" with a real server that keeps state
// per connection: server-everything, behind corral, remembers the roots its
// client gave it. With one shared process, client B saw client A's roots;
// with a process per session, each official TypeScript SDK client sees its
// own, and each session's end stops its process.
//
//   cd .ci/interop && npm ci && CORRAL_BIN=/path/to/corral node --test scope.test.js
//
// CORRAL_BIN names corral's binary; unset, it is built with `go build`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ListRootsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { alive, children, entry, freePort, listening, spawnCorral, stop, writeConfig } from './harness.js';


// waitUntil polls cond (process tables give no signal) until it holds or ms pass.
async function waitUntil(what, cond, ms = 15000) {
  for (const deadline = Date.now() + ms; !cond();) {
    if (Date.now() > deadline) throw new Error(`gave up after ${ms} ms waiting for ${what}`);
    await sleep(50);
  }
}

async function startCorral(t) {
  const port = await freePort();
  const cfg = writeConfig(t, 'corral-interop-scope-', {
    listen: `127.0.0.1:${port}`,
    mcpServers: {
      everything: { command: process.execPath, args: [entry('@modelcontextprotocol/server-everything'), 'stdio'], scope: 'session', maxInstances: 4 },
    },
  });
  const proc = spawnCorral(cfg);
  proc.port = port;
  const seen = new Set();
  proc.note = () => { for (const pid of children(proc.child.pid)) seen.add(pid); };
  t.after(async () => {
    const { code, signal } = await stop(proc.child);
    for (const pid of seen) if (alive(pid)) try { process.kill(pid, 'SIGKILL'); } catch {}
    assert.deepEqual([code, signal], [0, null], `corral's exit\n${proc.log}`);
  });
  await listening(proc);
  return proc;
}

// rootsClient connects a client that declares roots and answers with one
// root of its own.
async function rootsClient(t, port, name) {
  const client = new Client({ name: `corral-interop-${name}`, version: '1.0.0' }, { capabilities: { roots: { listChanged: true } } });
  client.setRequestHandler(ListRootsRequestSchema, async () => ({ roots: [{ uri: `file:///${name}`, name }] }));
  const transport = new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`));
  await client.connect(transport);
  t.after(() => client.close().catch(() => {}));
  return { client, transport };
}

const rootsOf = async (client) => (await client.callTool({ name: 'get-roots-list', arguments: {} })).content[0].text;

test('scope session: each SDK client gets its own server-everything, which sees only its roots, and its end stops it', async (t) => {
  const proc = await startCorral(t);
  try {
    const a = await rootsClient(t, proc.port, 'alice');
    // The probe that listed the server is gone before any session calls it.
    await waitUntil('the probe process to stop', () => children(proc.child.pid).length === 0);
    const b = await rootsClient(t, proc.port, 'bob');
    const seenByA = await rootsOf(a.client), seenByB = await rootsOf(b.client);
    assert.match(seenByA, /file:\/\/\/alice/);
    assert.doesNotMatch(seenByA, /bob/, 'client A was shown client B\'s roots');
    assert.match(seenByB, /file:\/\/\/bob/);
    assert.doesNotMatch(seenByB, /alice/, 'client B was shown client A\'s roots');
    proc.note();
    const two = children(proc.child.pid);
    assert.equal(two.length, 2, `corral's children with two sessions: ${two}`);

    await a.transport.terminateSession(); // DELETE
    await waitUntil('one session\'s process to stop when it ended', () => children(proc.child.pid).length === 1);
    assert.match(await rootsOf(b.client), /file:\/\/\/bob/, 'the open session lost its process');
    await b.transport.terminateSession();
    await waitUntil('the other session\'s process to stop', () => children(proc.child.pid).length === 0);
    assert.deepEqual(two.filter(alive), [], 'server processes left running');
  } catch (e) {
    e.message += `\n--- corral stderr ---\n${proc.log}`;
    throw e;
  }
});

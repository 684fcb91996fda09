// Interop: JSON-RPC batches sent by the official MCP TypeScript SDK's
// StreamableHTTPClientTransport (its send takes an array), in a session of
// MCP 2025-03-26, the one version with batches, and refused in a session of
// a later one.
//
//   cd .ci/interop && npm ci && CORRAL_BIN=... FAKESERVER_BIN=... node --test batch.test.js
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { fakeserver, freePort, listening, spawnCorral, stop, writeConfig } from './harness.js';

const FAKE = fakeserver();

async function startCorral(t) {
  const port = await freePort();
  const cfg = writeConfig(t, 'corral-batch-', { listen: `127.0.0.1:${port}`, mcpServers: { fake: { command: FAKE, args: ['-name', 'fake'] } } });
  const proc = spawnCorral(cfg);
  t.after(() => stop(proc.child));
  await listening(proc);
  return new URL(`http://127.0.0.1:${port}/mcp`);
}

// session opens a 2025-03-26 session with the SDK's transport alone (its
// Client always asks for the latest version), and returns the transport
// and a function that waits for the answer to a request ID.
async function session(t, url) {
  const transport = new StreamableHTTPClientTransport(url);
  const answers = new Map(), waiters = new Map();
  transport.onmessage = (m) => {
    if (!('id' in m) || 'method' in m) return;
    answers.set(m.id, m);
    waiters.get(m.id)?.(m);
  };
  const answer = (id) => answers.has(id) ? Promise.resolve(answers.get(id))
    : Promise.race([new Promise((resolve) => waiters.set(id, resolve)),
      sleep(20000, null, { ref: false }).then(() => { throw new Error(`no answer to request ${id} within 20 s`); })]);
  await transport.start();
  t.after(() => transport.close().catch(() => {}));
  await transport.send({ jsonrpc: '2.0', id: 0, method: 'initialize',
    params: { protocolVersion: '2025-03-26', capabilities: {}, clientInfo: { name: 'corral-batch', version: '1.0.0' } } });
  const init = await answer(0);
  assert.equal(init.result?.protocolVersion, '2025-03-26', JSON.stringify(init));
  transport.setProtocolVersion('2025-03-26');
  await transport.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
  return { transport, answer };
}

const echo = (id, text) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'echo', arguments: { text } } });
const textOf = (m) => m.result?.content?.map((c) => c.text).join('') ?? JSON.stringify(m);

test('Streamable HTTP, 2025-03-26: a batch from the SDK transport gets one answer per request', async (t) => {
  const url = await startCorral(t);
  const { transport, answer } = await session(t, url);
  // The server may still be starting: the first call waits for it.
  await transport.send(echo(1, 'warm'));
  assert.equal(textOf(await answer(1)), 'warm');
  await transport.send([echo(2, 'two'), { jsonrpc: '2.0', method: 'notifications/roots/list_changed' }, echo('3', 'three')]);
  assert.equal(textOf(await answer(2)), 'two');
  assert.equal(textOf(await answer('3')), 'three');
  // Notifications only: 202, which send resolves on.
  await transport.send([{ jsonrpc: '2.0', method: 'notifications/roots/list_changed' }, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 99 } }]);
});

test('Streamable HTTP, 2025-11-25: a batch is refused with 400 naming the session\'s version', async (t) => {
  const url = await startCorral(t);
  const client = new Client({ name: 'corral-batch', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(url);
  await client.connect(transport);
  t.after(() => client.close().catch(() => {}));
  await assert.rejects(transport.send([{ jsonrpc: '2.0', id: 50, method: 'ping' }]),
    (e) => e.code === 400 && /negotiated 2025-11-25/.test(e.message));
  assert.deepEqual(await client.ping(), {});
});

// Interop test of corral's legacy HTTP+SSE front end (MCP 2024-11-05) with
// the official TypeScript SDK's SSEClientTransport, server-everything and
// the fakeserver behind corral.
//
//   cd .ci/interop && npm ci && CORRAL_BIN=... FAKESERVER_BIN=... node --test sse.test.js
//
// CORRAL_BIN and FAKESERVER_BIN name the binaries; either one that is unset is
// built from the repository with `go build`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import { CreateMessageRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { entry, fakeserver, freePort, listening, spawnCorral, stop, writeConfig } from './harness.js';

const FAKE = fakeserver();

// startCorral writes a config with server-everything and the fakeserver,
// runs corral over HTTP, and resolves once it listens. corral is stopped
// when the test ends.
async function startCorral(t) {
  const port = await freePort();
  const cfg = writeConfig(t, 'corral-interop-sse-', {
    listen: `127.0.0.1:${port}`,
    mcpServers: {
      everything: { command: process.execPath, args: [entry('@modelcontextprotocol/server-everything'), 'stdio'] },
      fake: { command: FAKE, args: ['-name', 'fake'] },
    },
  });
  const proc = spawnCorral(cfg);
  proc.port = port;
  t.after(() => stop(proc.child, 5000));
  await listening(proc);
  return proc;
}

// metric reads a metric without labels from corral's /metrics.
async function metric(port, name) {
  const body = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const m = body.match(new RegExp(`^${name} (\\S+)$`, 'm'));
  assert.ok(m, `/metrics has no ${name}`);
  return Number(m[1]);
}

const text = (res) => { assert.ok(!res.isError, `tool error: ${JSON.stringify(res)}`); return res.content.map((c) => c.text).join(''); };

test('legacy SSE: SSEClientTransport lists and calls tools of the fakeserver and server-everything, and close ends its session', async (t) => {
  const proc = await startCorral(t);
  try {
    const client = new Client({ name: 'corral-interop-sse', version: '1.0.0' }, { capabilities: { sampling: {} } });
    client.setRequestHandler(CreateMessageRequestSchema, async () => (
      { model: 'interop-model', role: 'assistant', content: { type: 'text', text: 'sampled over SSE' } }));
    const transport = new SSEClientTransport(new URL(`http://127.0.0.1:${proc.port}/sse`));
    await client.connect(transport);
    t.after(() => client.close().catch(() => {}));
    assert.equal(client.getServerVersion().name, 'corral');
    assert.match(transport._endpoint.href, new RegExp(`^http://127\\.0\\.0\\.1:${proc.port}/messages\\?sessionId=[A-Za-z0-9_-]+\\.[0-9a-f]{32}$`));

    // Servers start in the background: list until both servers' tools are there.
    const want = ['everything__echo', 'fake__echo', 'get-sum', 'whoami', 'sample'];
    let names = [];
    for (const deadline = Date.now() + 20000; !want.every((n) => names.includes(n)) && Date.now() < deadline; await sleep(100)) {
      names = (await client.listTools()).tools.map((x) => x.name);
    }
    for (const n of want) assert.ok(names.includes(n), `${n} missing from ${names}`);

    // Answers come on the one stream, each to its own request.
    const [fake, everything, sum] = await Promise.all([
      client.callTool({ name: 'fake__echo', arguments: { text: 'über SSE' } }),
      client.callTool({ name: 'everything__echo', arguments: { message: 'ping ✓' } }),
      client.callTool({ name: 'get-sum', arguments: { a: 2, b: 40 } }),
    ]);
    assert.equal(text(fake), 'über SSE');
    assert.equal(text(everything), 'Echo: ping ✓');
    assert.match(text(sum), /\b42\b/);
    // A server's request reaches the client on the stream; its answer, POSTed, the server.
    assert.equal(text(await client.callTool({ name: 'sample', arguments: { prompt: 'hi' } })), 'sampled: sampled over SSE');

    assert.equal(await metric(proc.port, 'corral_sessions'), 1);
    await client.close();
    for (const deadline = Date.now() + 10000; await metric(proc.port, 'corral_sessions') !== 0; await sleep(50)) {
      assert.ok(Date.now() < deadline, 'the session was still open 10 s after the client closed its stream');
    }
    const r = await stop(proc.child);
    assert.deepEqual([r.code, r.signal], [0, null]);
  } catch (e) {
    e.message += `\n--- corral stderr ---\n${proc.log}`;
    throw e;
  }
});

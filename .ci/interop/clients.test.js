// Interop test of named clients and profiles: two official TypeScript SDK
// clients, each with its own bearer token, connect to one corral and each
// sees only its profile's tools; a tool outside a profile is unknown to its
// client, the server never seeing the call; a token no client has gets 401;
// and a server with "scope": "client" runs with each client's own env.
//
//   cd .ci/interop && npm ci && CORRAL_BIN=/path/to/corral FAKESERVER_BIN=/path/to/fakeserver node --test clients.test.js
//
// CORRAL_BIN and FAKESERVER_BIN name the binaries; either unset is built with `go build`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { children, alive, fakeserver, freePort, listening, spawnCorral, stop, writeConfig } from './harness.js';

const FAKE = fakeserver();

async function startCorral(t) {
  const port = await freePort();
  const tokens = { alice: crypto.randomBytes(32).toString('hex'), bob: crypto.randomBytes(32).toString('hex') };
  const cfg = writeConfig(t, 'corral-interop-clients-', {
    listen: `127.0.0.1:${port}`,
    clients: {
      alice: { tokenFile: 'alice.token', profile: 'dev', env: { mine: { WHOAMI_VALUE: 'alice-env' } } },
      bob: { tokenFile: 'bob.token', profile: 'ops', env: { mine: { WHOAMI_VALUE: 'bob-env' } } },
    },
    profiles: {
      dev: { servers: { alpha: {}, mine: {} } },
      ops: { servers: { beta: {}, mine: { tools: { allow: ['whoami'] } } } },
    },
    audit: { file: 'audit.jsonl' },
    mcpServers: {
      alpha: { command: FAKE, args: ['-name', 'alpha', '-lifetime', '0'], prefix: 'alpha', tools: { allow: ['echo', 'whoami'] } },
      beta: { command: FAKE, args: ['-name', 'beta', '-lifetime', '0'], prefix: 'beta', tools: { allow: ['echo', 'sleep'] } },
      mine: { command: FAKE, args: ['-name', 'mine', '-lifetime', '0'], prefix: 'mine', tools: { allow: ['echo', 'whoami'] }, scope: 'client' },
    },
  });
  const dir = path.dirname(cfg);
  for (const [name, token] of Object.entries(tokens)) fs.writeFileSync(path.join(dir, `${name}.token`), token + '\n', { mode: 0o600 });
  const proc = spawnCorral(cfg);
  proc.url = `http://127.0.0.1:${port}/mcp`;
  proc.tokens = tokens;
  proc.audit = path.join(dir, 'audit.jsonl');
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

async function connect(t, url, name, token) {
  const client = new Client({ name: `corral-interop-${name}`, version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: `Bearer ${token}` } } });
  await client.connect(transport);
  t.after(() => client.close().catch(() => {}));
  return client;
}

const toolNames = async (client) => (await client.listTools()).tools.map((x) => x.name).sort();

test('clients: two SDK clients with two tokens each see only their profile\'s tools', async (t) => {
  const proc = await startCorral(t);
  try {
    const alice = await connect(t, proc.url, 'alice', proc.tokens.alice);
    const bob = await connect(t, proc.url, 'bob', proc.tokens.bob);
    assert.deepEqual(await toolNames(alice), ['alpha__echo', 'alpha__whoami', 'mine__echo', 'mine__whoami']);
    assert.deepEqual(await toolNames(bob), ['beta__echo', 'beta__sleep', 'mine__whoami']);

    const text = (r) => r.content[0].text;
    assert.equal(text(await alice.callTool({ name: 'alpha__echo', arguments: { text: 'hi alice' } })), 'hi alice');
    assert.equal(text(await bob.callTool({ name: 'beta__echo', arguments: { text: 'hi bob' } })), 'hi bob');

    // "scope": "client": each client's own process, with its own env.
    const whoA = JSON.parse(text(await alice.callTool({ name: 'mine__whoami', arguments: {} })));
    const whoB = JSON.parse(text(await bob.callTool({ name: 'mine__whoami', arguments: {} })));
    proc.note();
    assert.equal(whoA.env, 'alice-env');
    assert.equal(whoB.env, 'bob-env');
    assert.notEqual(whoA.pid, whoB.pid, 'the two clients share one process of a "scope": "client" server');

    // A tool outside the profile: the answer of a tool no server has.
    const unknown = async (client, name) => {
      const err = await client.callTool({ name, arguments: {} }).then(() => null, (e) => e);
      assert.ok(err, `${name} was called`);
      return { code: err.code, message: err.message.replaceAll(name, 'NAME') };
    };
    const none = await unknown(bob, 'no_such__tool');
    assert.equal(none.code, -32602, `the unknown tool's error: ${JSON.stringify(none)}`);
    assert.deepEqual(await unknown(bob, 'alpha__echo'), none, 'a server outside bob\'s profile answered otherwise than an unknown tool');
    assert.deepEqual(await unknown(bob, 'mine__echo'), none, 'a tool outside bob\'s profile answered otherwise than an unknown tool');
    assert.deepEqual(await unknown(alice, 'beta__sleep'), none, 'a server outside alice\'s profile answered otherwise than an unknown tool');

    // The audit trail names each client, and the refusals.
    const lines = fs.readFileSync(proc.audit, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    const row = (l) => `${l.client} ${l.name} ${l.outcome}`;
    for (const want of ['alice alpha__echo ok', 'bob beta__echo ok', 'alice mine__whoami ok', 'bob mine__whoami ok',
      'bob alpha__echo refused', 'bob mine__echo refused', 'alice beta__sleep refused']) {
      assert.ok(lines.some((l) => row(l) === want), `no audit line "${want}" in:\n${lines.map(row).join('\n')}`);
    }
  } catch (e) {
    e.message += `\n--- corral stderr ---\n${proc.log}`;
    throw e;
  }
});

test('clients: a token no client has gets 401, from the SDK and on the wire', async (t) => {
  const proc = await startCorral(t);
  const wrong = crypto.randomBytes(32).toString('hex');
  const client = new Client({ name: 'corral-interop-nobody', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(proc.url), { requestInit: { headers: { Authorization: `Bearer ${wrong}` } } });
  t.after(() => client.close().catch(() => {}));
  await assert.rejects(client.connect(transport), (e) => e.code === 401 && /wrong bearer token/.test(e.message));
  const res = await fetch(proc.url, {
    method: 'POST',
    headers: { Authorization: `Bearer ${wrong}`, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'x', version: '1' } } }),
  });
  await res.body?.cancel();
  assert.equal(res.status, 401);
  // A right token still gets in.
  const alice = await connect(t, proc.url, 'alice', proc.tokens.alice);
  assert.ok((await toolNames(alice)).includes('alpha__echo'));
});

// Interop test: a remote server that speaks only the HTTP+SSE transport of
// 2024-11-05, made with the official MCP TypeScript SDK's SSEServerTransport,
// behind corral ("type": "sse"), called by the SDK's Streamable HTTP client.
//
//   cd .ci/interop && npm ci && CORRAL_BIN=/path/to/corral node --test sseremote.test.js
//
// CORRAL_BIN names the binary; if unset, it is built from the repository.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import http from 'node:http';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { SSEServerTransport } from '@modelcontextprotocol/sdk/server/sse.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { listening, spawnCorral, stop, writeConfig } from './harness.js';



// startSSEServer serves MCP over HTTP+SSE with the SDK: GET /sse opens a
// session, POST /messages?sessionId=... carries the client's messages. Its
// one tool, greet, sends progress before its answer. It records the
// Authorization header of every request, and counts the streams opened.
async function startSSEServer(t) {
  const transports = new Map();
  const seen = { auth: new Set(), streams: 0 };
  const srv = http.createServer(async (req, res) => {
    seen.auth.add(`${req.method} ${req.headers.authorization ?? ''}`);
    const url = new URL(req.url, 'http://127.0.0.1');
    if (req.method === 'GET' && url.pathname === '/sse') {
      const transport = new SSEServerTransport('/messages', res);
      transports.set(transport.sessionId, transport);
      transport.onclose = () => transports.delete(transport.sessionId);
      seen.streams++;
      await newMcpServer().connect(transport);
      return;
    }
    const transport = transports.get(url.searchParams.get('sessionId'));
    if (req.method === 'POST' && url.pathname === '/messages' && transport) {
      await transport.handlePostMessage(req, res);
      return;
    }
    res.writeHead(404).end('no such session');
  });
  srv.listen(0, '127.0.0.1');
  await once(srv, 'listening');
  t.after(() => new Promise((resolve) => { srv.closeAllConnections(); srv.close(resolve); }));
  // endSessions ends every open event stream, as a server restarting does.
  const endSessions = async () => { for (const tr of [...transports.values()]) await tr.close(); };
  return { url: `http://127.0.0.1:${srv.address().port}/sse`, seen, endSessions };
}

function newMcpServer() {
  const server = new Server({ name: 'sdk-sse', version: '1.0.0' }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: [{ name: 'greet', description: 'Greets', inputSchema: { type: 'object', properties: { who: { type: 'string' } } } }],
  }));
  server.setRequestHandler(CallToolRequestSchema, async (req, extra) => {
    const token = req.params._meta?.progressToken;
    if (token !== undefined) {
      await extra.sendNotification({ method: 'notifications/progress', params: { progressToken: token, progress: 1, total: 1 } });
    }
    return { content: [{ type: 'text', text: `hello, ${req.params.arguments?.who ?? 'nobody'}, over SSE` }] };
  });
  return server;
}

// startCorral runs corral with the config and resolves with its MCP URL once it listens.
async function startCorral(t, config) {
  const cfg = writeConfig(t, 'corral-sseremote-', { listen: '127.0.0.1:0', ...config });
  const proc = spawnCorral(cfg);
  t.after(() => stop(proc.child));
  await listening(proc);
  return proc;
}

// greetUntil calls greet until it answers, within 20 s: corral connects to
// the server in the background.
async function greetUntil(client, args, options) {
  const deadline = Date.now() + 20000;
  for (;;) {
    try {
      const res = await client.callTool({ name: 'greet', arguments: args }, undefined, options);
      if (!res.isError) return res.content[0].text;
      if (Date.now() > deadline) assert.fail(`greet answered ${JSON.stringify(res)}`);
    } catch (e) {
      if (Date.now() > deadline) throw e;
    }
    await sleep(100);
  }
}

test('a server with only the HTTP+SSE transport (SDK SSEServerTransport) is served through corral, and reconnected', async (t) => {
  const remote = await startSSEServer(t);
  const proc = await startCorral(t, {
    restartDelay: '100ms',
    mcpServers: { old: { type: 'sse', url: remote.url, headers: { Authorization: 'Bearer sse-token' } } },
  });
  try {
    const client = new Client({ name: 'corral-interop', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(proc.url)));
    t.after(() => client.close().catch(() => {}));

    const progress = [];
    const text = await greetUntil(client, { who: 'sdk' }, { onprogress: (p) => progress.push(p.progress) });
    assert.equal(text, 'hello, sdk, over SSE');
    assert.deepEqual(progress, [1], 'the progress the server sent on its stream');
    assert.ok(remote.seen.auth.has('GET Bearer sse-token') && remote.seen.auth.has('POST Bearer sse-token'),
      `the configured header on the stream and the posts: ${[...remote.seen.auth]}`);

    // The server ends its session (as a restart does): corral opens a new one.
    await remote.endSessions();
    const deadline = Date.now() + 20000;
    while (remote.seen.streams < 2 && Date.now() < deadline) await sleep(50);
    assert.equal(remote.seen.streams, 2, 'corral opened a new event stream after the first ended');
    assert.equal(await greetUntil(client, { who: 'again' }), 'hello, again, over SSE');
  } catch (e) {
    e.message += `\n--- corral stderr ---\n${proc.log}`;
    throw e;
  }
});

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
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const require = createRequire(import.meta.url);
const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const HELLO = 'hello from the corral interop test\n';
const EXPECTED = ['everything__echo', 'fake__echo', 'get-sum', 'whoami', 'list_directory'];

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

// entry is the file that a package's (only) bin runs.
function entry(name) {
  const pj = require.resolve(`${name}/package.json`);
  const { bin } = JSON.parse(fs.readFileSync(pj, 'utf8'));
  return path.join(path.dirname(pj), typeof bin === 'string' ? bin : Object.values(bin)[0]);
}

const freePort = () => new Promise((resolve, reject) => {
  const srv = net.createServer().on('error', reject);
  srv.listen(0, '127.0.0.1', () => { const { port } = srv.address(); srv.close(() => resolve(port)); });
});

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
function psTable() {
  return execFileSync('ps', ['-A', '-o', 'pid=,ppid=,stat='], { encoding: 'utf8' }).trim().split('\n')
    .map((l) => l.trim().split(/\s+/)).map(([pid, ppid, stat]) => ({ pid: +pid, ppid: +ppid, stat }));
}
const alive = (pid) => psTable().some((p) => p.pid === pid && !p.stat.startsWith('Z'));
function descendants(pid) {
  const table = psTable(), out = [];
  for (const queue = [pid]; queue.length;) {
    const cur = queue.shift();
    for (const p of table) if (p.ppid === cur && !p.stat.startsWith('Z')) { out.push(p.pid); queue.push(p.pid); }
  }
  return out;
}

// track makes sure that child and every descendant seen is dead after the test.
function track(t, child) {
  const pids = new Set();
  t.after(async () => {
    await stop(child, 5000); // graceful first, so that corral reaps its children
    for (const pid of pids) if (alive(pid)) try { process.kill(pid, 'SIGKILL'); } catch {}
  });
  return { note: () => { for (const pid of descendants(child.pid)) pids.add(pid); } };
}

// stop sends SIGTERM and waits up to ms for the exit; SIGKILL after that.
async function stop(child, ms = 15000) {
  const t0 = Date.now();
  if (child.exitCode !== null || child.signalCode !== null) return { code: child.exitCode, signal: child.signalCode, ms: 0 };
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  const r = await Promise.race([exited, sleep(ms, null, { ref: false })]);
  if (r) return { code: r[0], signal: r[1], ms: Date.now() - t0 };
  child.kill('SIGKILL');
  await exited;
  return { code: null, signal: 'timeout', ms: Date.now() - t0 };
}

// startHTTP runs corral over HTTP and resolves once it listens.
async function startHTTP(t, cfg) {
  const child = spawn(CORRAL, ['-config', cfg], { stdio: ['ignore', 'ignore', 'pipe'] });
  const proc = { child, log: '', ...track(t, child) };
  child.stderr.setEncoding('utf8');
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`corral not listening after 10 s:\n${proc.log}`)), 10000);
    child.stderr.on('data', (s) => { proc.log += s; if (/serving MCP over Streamable HTTP/.test(proc.log)) { clearTimeout(timer); resolve(); } });
    child.on('exit', (code) => { clearTimeout(timer); reject(new Error(`corral exited with ${code}:\n${proc.log}`)); });
  });
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
    assert.ok(Date.now() - t0 < 2000, `corral took ${Date.now() - t0} ms to exit after end of stdin`);
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

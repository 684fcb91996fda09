// Shared harness of the interop tests: the binaries under test, npm packages'
// entry points, free ports, stopping processes, the process table, and
// running corral on a config until it serves. Not a test file (no .test.js),
// so `node --test` runs it only through the tests that import it.
//
// CORRAL_BIN and FAKESERVER_BIN name the binaries; either one that is unset is
// built from the repository with `go build` (once per test process, into a
// temporary directory removed at exit).
import { spawn, execFileSync } from 'node:child_process';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
export const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

let buildDir;
// binary returns the path in the environment variable envName, or builds the
// Go package pkg (relative to REPO) and returns the built file.
export function binary(envName, pkg) {
  if (process.env[envName]) return path.resolve(process.env[envName]);
  buildDir ??= fs.mkdtempSync(path.join(os.tmpdir(), 'corral-interop-bin-'));
  const out = path.join(buildDir, path.basename(pkg === '.' ? 'corral' : pkg));
  if (!fs.existsSync(out)) execFileSync('go', ['build', '-o', out, pkg], { cwd: REPO, stdio: 'inherit' });
  return out;
}
process.on('exit', () => buildDir && fs.rmSync(buildDir, { recursive: true, force: true }));

export const CORRAL = binary('CORRAL_BIN', '.');
// fakeserver is a function so that tests without it do not build it.
export const fakeserver = () => binary('FAKESERVER_BIN', './fakeserver');

// entry returns the file of an installed npm package's (first) bin.
export function entry(name) {
  const pj = require.resolve(`${name}/package.json`);
  const { bin } = JSON.parse(fs.readFileSync(pj, 'utf8'));
  return path.join(path.dirname(pj), typeof bin === 'string' ? bin : Object.values(bin)[0]);
}

export const freePort = () => new Promise((resolve, reject) => {
  const srv = net.createServer().on('error', reject);
  srv.listen(0, '127.0.0.1', () => { const { port } = srv.address(); srv.close(() => resolve(port)); });
});

// stop sends SIGTERM and waits up to ms for the exit; SIGKILL after that.
// It resolves with { code, signal, ms }: the exit (signal 'timeout' if it had
// to be killed) and how long it took (0 if child had already exited).
export async function stop(child, ms = 15000) {
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

export function psTable() {
  return execFileSync('ps', ['-A', '-o', 'pid=,ppid=,stat='], { encoding: 'utf8' }).trim().split('\n')
    .map((l) => l.trim().split(/\s+/)).map(([pid, ppid, stat]) => ({ pid: +pid, ppid: +ppid, stat }));
}
// alive reports whether pid runs (a zombie does not).
export const alive = (pid) => psTable().some((p) => p.pid === pid && !p.stat.startsWith('Z'));
// children lists the live children of pid; descendants all live processes below it.
export const children = (pid) => psTable().filter((p) => p.ppid === pid && !p.stat.startsWith('Z')).map((p) => p.pid);
export function descendants(pid) {
  const table = psTable(), out = [];
  for (const queue = [pid]; queue.length;) {
    const cur = queue.shift();
    for (const p of table) if (p.ppid === cur && !p.stat.startsWith('Z')) { out.push(p.pid); queue.push(p.pid); }
  }
  return out;
}

// writeConfig writes config as corral.json into a new temporary directory
// (prefix names it), removed when the test t ends, and returns its path.
export function writeConfig(t, prefix, config) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const cfg = path.join(dir, 'corral.json');
  fs.writeFileSync(cfg, JSON.stringify(config));
  return cfg;
}

// spawnCorral starts corral on the config file cfg and returns { child, log },
// log growing with corral's stderr. The caller stops it (t.after), then waits
// with listening.
export function spawnCorral(cfg, args = []) {
  const child = spawn(CORRAL, ['-config', cfg, ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
  const proc = { child, log: '' };
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (s) => { proc.log += s; });
  return proc;
}

// listening resolves once proc's corral serves Streamable HTTP, setting
// proc.url to the URL it logs; it rejects with corral's log if corral exits
// first or 10 s pass.
export function listening(proc) {
  return new Promise((resolve, reject) => {
    const { child } = proc;
    const timer = setTimeout(() => reject(new Error(`corral not listening after 10 s:\n${proc.log}`)), 10000);
    child.stderr.on('data', () => {
      if (!/serving MCP over Streamable HTTP/.test(proc.log)) return;
      proc.url = /serving MCP over Streamable HTTP.* url=(\S+)/.exec(proc.log)?.[1];
      clearTimeout(timer);
      resolve(proc.url);
    });
    child.on('exit', (code) => { clearTimeout(timer); reject(new Error(`corral exited with ${code}:\n${proc.log}`)); });
  });
}

// Compares two result directories of the official MCP conformance suite
// (conformance server -o DIR), the server alone and through corral: prints
// the counts of each and every check that differs, and exits 1 if a check
// that passes directly does not pass through corral (or a scenario run
// directly has no result through corral), or if either run has no check.
//
//	node compare.mjs LABEL DIRECT_DIR CORRAL_DIR
//
// LABEL (the protocol version run) starts each line printed.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

// load returns the checks of a results directory: a Map from
// "scenario / check id" (with #N for a repeated id) to its status.
function load(dir) {
  const checks = new Map();
  const scenarios = new Set();
  for (const entry of readdirSync(dir)) {
    // server-<scenario>-<timestamp>, the timestamp an ISO time with - for : and .
    const m = /^server-(.+)-\d{4}-\d\d-\d\dT[\d-]+Z$/.exec(entry);
    if (!m) continue;
    scenarios.add(m[1]);
    const list = JSON.parse(readFileSync(join(dir, entry, 'checks.json'), 'utf8'));
    const seen = new Map();
    for (const c of list) {
      const n = (seen.get(c.id) ?? 0) + 1;
      seen.set(c.id, n);
      const key = `${m[1]} / ${c.id}${n > 1 ? `#${n}` : ''}`;
      checks.set(key, { status: c.status, error: c.errorMessage });
    }
  }
  return { checks, scenarios };
}

// counts summarises a run's checks by status.
function counts({ checks, scenarios }) {
  const by = {};
  for (const { status } of checks.values()) by[status] = (by[status] ?? 0) + 1;
  const others = Object.entries(by)
    .filter(([s]) => s !== 'SUCCESS' && s !== 'FAILURE')
    .map(([s, n]) => `${n} ${s.toLowerCase()}`);
  return `${scenarios.size} scenarios, ${by.SUCCESS ?? 0}/${checks.size} checks passed` +
    ` (failures: ${by.FAILURE ?? 0}${others.length ? `; ${others.join(', ')}` : ''})`;
}

const [label, directDir, corralDir] = process.argv.slice(2);
const say = (line) => console.log(`mcpconformance ${label}: ${line}`);
const direct = load(directDir);
const corral = load(corralDir);
say(`directly:       ${counts(direct)}`);
say(`through corral: ${counts(corral)}`);

let bad = 0;
if (direct.checks.size === 0 || corral.checks.size === 0) {
  say('FAIL: a run has no checks at all');
  bad++;
}
for (const s of direct.scenarios) {
  if (!corral.scenarios.has(s)) {
    say(`FAIL: scenario ${s} ran directly but has no result through corral`);
    bad++;
  }
}
for (const [key, d] of direct.checks) {
  const c = corral.checks.get(key);
  if (d.status === 'SUCCESS' && c?.status !== 'SUCCESS') {
    say(`FAIL: ${key} passes directly but through corral is ${c ? c.status : 'missing'}` +
      (c?.error ? `: ${c.error}` : ''));
    bad++;
  } else if (c && d.status !== c.status) {
    say(`note: ${key} is ${d.status} directly, ${c.status} through corral`);
  }
}
for (const [key, d] of direct.checks) {
  if (d.status === 'FAILURE' && corral.checks.get(key)?.status === 'FAILURE') {
    say(`fails both directly and through corral: ${key}: ${d.error ?? ''}`);
  }
}
if (bad > 0) {
  say(`FAIL: ${bad} regressions through corral`);
  process.exit(1);
}
say('ok: every check that passes directly passes through corral');

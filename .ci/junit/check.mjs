// Reads the JUnit XML that corral-conformance wrote with two JUnit readers
// from the npm registry, and checks that they see what the same run wrote
// as JSON lines: every case, its verdict, its time and its reason.
//
//	node check.mjs junit.xml results.jsonl
import { readFileSync } from 'node:fs';
import { XMLValidator } from 'fast-xml-parser';
import trp from 'test-results-parser';

const [xmlFile, jsonFile] = process.argv.slice(2);
const xml = readFileSync(xmlFile, 'utf8');
const lines = readFileSync(jsonFile, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
const problems = [];
const want = (ok, msg) => { if (!ok) problems.push(msg); };

const valid = XMLValidator.validate(xml, { allowBooleanAttributes: false });
want(valid === true, `fast-xml-parser: not well-formed XML: ${JSON.stringify(valid.err)}`);

const result = trp.parse({ type: 'junit', files: [xmlFile] });
const cases = new Map();
for (const suite of result.suites) for (const c of suite.cases) cases.set(c.name, c);
const status = { pass: 'PASS', fail: 'FAIL', skip: 'SKIP' };
want(cases.size === lines.length, `test-results-parser read ${cases.size} cases, the JSON lines have ${lines.length}`);
const counts = { pass: 0, fail: 0, skip: 0 };
for (const r of lines) {
	counts[r.verdict]++;
	const c = cases.get(r.case);
	if (!c) { problems.push(`case ${r.case} is not in the JUnit file`); continue; }
	want(c.status === status[r.verdict], `case ${r.case}: JUnit says ${c.status}, the JSON line ${r.verdict}`);
	want(Math.abs(c.duration / 1000 - r.seconds) < 0.01, `case ${r.case}: JUnit time ${c.duration} ms, JSON ${r.seconds} s`);
	if (r.verdict === 'fail') want(c.failure === r.reason, `case ${r.case}: JUnit failure message ${JSON.stringify(c.failure)}, JSON reason ${JSON.stringify(r.reason)}`);
}
// Totals as the reader counts them (it leaves skipped cases out of total).
want(result.failed === counts.fail, `JUnit failures ${result.failed}, JSON ${counts.fail}`);
want(result.skipped === counts.skip, `JUnit skipped ${result.skipped}, JSON ${counts.skip}`);
want(result.passed === counts.pass, `JUnit passed ${result.passed}, JSON ${counts.pass}`);
const skipMsg = [...xml.matchAll(/<skipped message="([^"]*)"/g)].length;
want(skipMsg === counts.skip, `${skipMsg} <skipped> elements carry a message, want ${counts.skip}`);

if (problems.length) {
	console.error('junit check: FAIL\n' + problems.join('\n'));
	process.exit(1);
}
console.log(`junit check: ${xmlFile} read by fast-xml-parser and test-results-parser: ${counts.pass} passed, ${counts.fail} failed, ${counts.skip} skipped, each as its JSON line says`);

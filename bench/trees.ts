// Process trees for the exec and stop-block suites. A tree's script writes its pids to "$1" (and
// its nested part's to "$1.n"): the handshake. Whatever survives a sample is SIGKILLed by pid.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { exec, type ExecOptions } from '../src/exec/index.js';
import { isDead, readStat } from '../src/base/proc.js';

const dir = mkdtempSync(join(tmpdir(), 'fullstop-bench-trees-'));
process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
let trees = 0;
export const pidfile = () => join(dir, `tree-${trees++}`);
export const alive = (pids: readonly number[]) => pids.filter((pid) => !isDead(readStat(pid))); // a /proc entry, not a zombie (the library's reader decides)

/** Both sides' "gone": polled every event-loop turn. */
export const untilGone = async (pids: readonly number[]) => { while (alive(pids).length > 0) await new Promise((r) => setImmediate(r)); };

/** The pids the tree wrote to `file` (and `file.n` when `nested`). */
export async function pidsOf(file: string, nested: boolean): Promise<number[]> {
  const files = nested ? [file, `${file}.n`] : [file];
  for (const deadline = Date.now() + 60_000; !files.every((f) => existsSync(f)); await delay(2)) {
    if (Date.now() > deadline) throw new Error(`tree did not write ${file}`);
  }
  return [...new Set(files.map((f) => readFileSync(f, 'utf8')).join(' ').trim().split(/\s+/).map(Number))];
}

/** The end of every sample. */
export async function reap(pids: readonly number[]): Promise<void> {
  for (const pid of alive(pids)) try { process.kill(pid, 'SIGKILL'); } catch { /* already gone */ }
  await untilGone(pids);
}

/** A tree of `script`: fullstop's side under `exec(…, options)`, the raw side spawned by node (in a process group of its own by default). */
export async function execTree(script: string, options: ExecOptions, nested = true) {
  const file = pidfile();
  const running = exec('sh', ['-c', script, 'tree', file], options);
  return { running, pids: await pidsOf(file, nested) };
}

export async function spawnTree(script: string, { detached = true, nested = true } = {}) {
  const file = pidfile();
  const child = spawn('sh', ['-c', script, 'tree', file], { detached, stdio: 'ignore' });
  const exited = new Promise((r) => child.once('exit', r));
  return { child, exited, pids: await pidsOf(file, nested) };
}

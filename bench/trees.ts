/**
 * Process trees for the exec and stop-block suites: the pid-file handshake, "gone" as the /proc
 * entry missing or a zombie, and the reaping that leaves nothing behind.
 */

import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { isDead, readStat } from '../src/exec/proc.js';

/** Alive: a /proc entry that is not a zombie or dead (the library's own /proc reader decides). */
export const alive = (pids: readonly number[]) => pids.filter((pid) => !isDead(readStat(pid)));

/** Both sides' "gone" detector: poll every event-loop turn until no pid is alive. */
export async function untilGone(pids: readonly number[]): Promise<void> {
  while (alive(pids).length > 0) await new Promise((r) => setImmediate(r));
}

/** The handshake: the pids the tree wrote to `pidfile` (and `pidfile.n` when `nested`). */
export async function pidsOf(pidfile: string, nested = true): Promise<number[]> {
  const files = nested ? [pidfile, `${pidfile}.n`] : [pidfile];
  for (const deadline = Date.now() + 10_000; !files.every((f) => existsSync(f)); await delay(2)) {
    if (Date.now() > deadline) throw new Error(`tree did not write ${pidfile}`);
  }
  return [...new Set(files.map((f) => readFileSync(f, 'utf8')).join(' ').trim().split(/\s+/).map(Number))];
}

/** SIGKILL whatever of `pids` is still alive (the end of every sample). */
export async function reap(pids: readonly number[]): Promise<void> {
  for (const pid of alive(pids)) {
    try { process.kill(pid, 'SIGKILL'); } catch { /* already gone */ }
  }
  await untilGone(pids);
}

/** The raw side's tree: `script` in a shell, by default in a process group of its own; `exited` when the shell is reaped. */
export function spawnGroup(script: string, pidfile: string, detached = true) {
  const child = spawn('sh', ['-c', script, 'tree', pidfile], { detached, stdio: 'ignore' });
  return { child, exited: new Promise((r) => child.once('exit', r)) };
}

/** A temp dir of pid files, one a tree. */
export class Scratch {
  readonly dir = mkdtempSync(join(tmpdir(), 'fullstop-bench-exec-'));
  #n = 0;
  pidfile = () => join(this.dir, `tree-${this.#n++}`);
  remove = () => rmSync(this.dir, { recursive: true, force: true });
}

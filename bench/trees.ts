/**
 * Process trees for the exec and stop-block suites: the pid-file handshake, "gone" as the /proc
 * entry missing or a zombie, and the reaping that leaves nothing behind.
 */

import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const HANDSHAKE_MS = 10_000;
export const delay = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const tick = () => new Promise<void>((r) => setImmediate(r));

/** Alive: a /proc entry that is not a zombie (`Z`) or dead (`X`). */
export function isAlive(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) [ZX]/s.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}
export const alive = (pids: readonly number[]) => pids.filter(isAlive);

/** Both sides' "gone" detector: poll every event-loop turn until no pid is alive. */
export async function untilGone(pids: readonly number[]): Promise<void> {
  while (alive(pids).length > 0) await tick();
}

/** The handshake: the pids the tree wrote to `pidfile` (and `pidfile.n` when `nested`). */
export async function pidsOf(pidfile: string, nested = true): Promise<number[]> {
  const files = nested ? [pidfile, `${pidfile}.n`] : [pidfile];
  const deadline = Date.now() + HANDSHAKE_MS;
  while (!files.every((f) => existsSync(f))) {
    if (Date.now() > deadline) throw new Error(`tree did not write ${pidfile}`);
    await delay(2);
  }
  const words = files.map((f) => readFileSync(f, 'utf8')).join(' ').trim().split(/\s+/);
  return [...new Set(words.map(Number))];
}

/** SIGKILL whatever of `pids` is still alive (the end of every sample). */
export async function reap(pids: readonly number[]): Promise<void> {
  for (const pid of alive(pids)) {
    try { process.kill(pid, 'SIGKILL'); } catch { /* already gone */ }
  }
  await untilGone(pids);
}

export class Scratch {
  readonly dir = mkdtempSync(join(tmpdir(), 'fullstop-bench-exec-'));
  #n = 0;
  pidfile(): string { return join(this.dir, `tree-${this.#n++}`); }
  remove(): void { rmSync(this.dir, { recursive: true, force: true }); }
}

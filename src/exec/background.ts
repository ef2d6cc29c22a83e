/**
 * Background processes: children that belong to no turn (docs/design.md §2, "What a stop kills and
 * what it leaves"). A turn stop does not reach them; they end by their own `kill()`, by
 * `killAllBackground()`, or when the host process exits (cleanup.ts).
 */

import { activeToken } from '../token/context.js';
import { countBackground } from './background-live.js';
import { Child } from './child.js';
import { refuseCancelled } from './exec.js';
import { check, type ExecOptions } from './options.js';
import { killSpawned } from './rollback.js';
import type { ExecResult } from './result.js';
import type { Containment } from './tree.js';
import { failedToSpawn, probeSpawnError, spawn } from './spawn.js';

/**
 * A child started by `spawnBackground`.
 *
 * @example
 * const devServer = spawnBackground('npm', ['run', 'dev']);
 * void devServer.exited.then((r) => console.log(`dev server ended: ${r.exitCode ?? r.signal}`));
 * await devServer.kill();
 */
export interface BackgroundProcess {
  /** Pid of the child, which is also its process group id. */
  readonly pid: number;
  /** How its tree is contained (see `ExecResult.containment`). */
  readonly containment: Containment;
  /** Resolves when the child has exited and its output is drained (`cancelled: true` after `kill()`). */
  readonly exited: Promise<ExecResult>;
  /** Stop the tree (SIGTERM, `graceMs`, SIGKILL and sweep); resolves once it is gone. Idempotent. */
  kill(): Promise<void>;
}

/** Background children not yet settled. */
const running = new Set<Child>();

/**
 * Start `file` with `args` (no shell) as a process group that no turn owns: it survives every turn
 * stop. `options.token` is accepted (so exec options can be passed on unchanged) and not bound: a
 * background process is never stopped with a turn. That token's turn (else the ambient one) is
 * only remembered as the one that started it, so a stop of that turn while it is alive tells the
 * model it may still be running. `signal`, `timeoutMs` and `graceMs` apply as in
 * `exec`. Like any child, it keeps the host's event loop alive until it ends.
 *
 * Throws synchronously: `TypeError`/`RangeError` for bad arguments, `CancelledError` when `signal`
 * is already aborted, `ToolError` when the command cannot be spawned (ENOENT, EACCES).
 *
 * @example
 * const server = spawnBackground('python3', ['-m', 'http.server', '8000']);
 * // ... turns come and go, stops included ...
 * await server.kill();
 */
export function spawnBackground(file: string, args?: readonly string[], options?: ExecOptions): BackgroundProcess {
  const checked = check(file, args, options);
  const o = { ...checked, token: undefined };
  refuseCancelled(o);
  const startedAt = performance.now();
  const { subprocess, tree, registration, start, failure } = spawn(o);
  if (failure !== undefined) {
    void failure.catch(() => {}); // the real errno arrives a tick later; the probe gives it now
    throw failedToSpawn(o, probeSpawnError(o));
  }
  let child: Child;
  try {
    child = new Child(subprocess, tree, registration, o, startedAt);
  } catch (e) {
    void killSpawned(subprocess, tree, registration); // its SIGKILL is sent now, before the throw
    throw e;
  }
  running.add(child);
  // Not bound to the turn; only remembered as its, so its stop's marker can say it may still run.
  child.onDone(countBackground(checked.token ?? activeToken()));
  void child.settled.then(() => running.delete(child));
  child.result.catch(() => {}); // a failure nobody awaits must not crash the host
  child.begin(start);
  return {
    pid: child.pid,
    containment: tree.mode,
    exited: child.result,
    kill: () => {
      child.stop('cancel');
      return child.settled;
    },
  };
}

/**
 * Stop every background process (the same sequence as `kill()`, all at once); resolves when all
 * are gone.
 *
 * @example
 * process.once('beforeExit', () => void killAllBackground());
 */
export async function killAllBackground(): Promise<void> {
  const all = [...running];
  for (const child of all) child.stop('cancel');
  await Promise.all(all.map((child) => child.settled));
}

/**
 * `TreeKillTree`: the containment where there is no /proc to walk (macOS, Windows), or where it is
 * forced (`containment: 'tree-kill'`, `FULLSTOP_CONTAINMENT=tree-kill`). The child leads its own
 * process group (POSIX); a stop sends SIGTERM to the group, and the hard stop kills the child's
 * whole tree with tree-kill (`ps --ppid` on Linux, `pgrep -P` on macOS, `taskkill /T /F` on
 * Windows), then SIGKILLs the group. Without it only the child and its group would get the SIGKILL,
 * and a grandchild that left the group would survive.
 *
 * Identity (group.ts rule 2): the group and the tree are signalled only while Node has not reaped
 * the leader, so its pid still names our child and every process found as its descendant is ours.
 * Not guaranteed: tree-kill lists the tree, then signals it; a process that dies and whose pid is
 * reused in between would be signalled (the group is frozen with SIGSTOP first, so only processes
 * outside it can). Once the leader is reaped nothing more can be found: what it left running is
 * beyond reach (no /proc to tell its descendants from strangers').
 */

import { accessSync, constants } from 'node:fs';
import { createRequire } from 'node:module';
import { delimiter, join } from 'node:path';
import type treeKillFn from 'tree-kill';
import { readStat } from '../base/proc.js';
import { GONE_BOUND_MS, until } from './sweep.js';
import type { Tree } from './tree.js';

/**
 * tree-kill, loaded by the first tree of this mode (at its spawn, not at the stop): a host that never
 * uses this mode (Linux with /proc) never loads it.
 */
let treeKill: typeof treeKillFn | undefined;
const require = createRequire(import.meta.url);

/** The command tree-kill runs to list children, by platform (Windows: taskkill, whose failure it reports). */
const WALKERS: Partial<Record<NodeJS.Platform, string>> = { linux: 'ps', darwin: 'pgrep' };

export class TreeKillTree implements Tree {
  readonly mode = 'tree-kill' as const;
  readonly pid: number;
  /** Start time of the leader where /proc exists (the reaper checks it); `undefined` elsewhere. */
  readonly #start: number | undefined;
  /** `false` until Node has reaped the leader: until then the pid names our child. */
  #reaped = false;

  constructor(pid: number) {
    if (!Number.isInteger(pid) || pid <= 1) throw new RangeError(`pid: expected a child pid > 1, got ${pid}`);
    this.pid = pid;
    this.#start = process.platform === 'linux' ? readStat(pid)?.start : undefined;
    treeKill ??= require('tree-kill') as typeof treeKillFn;
  }

  /** The reaper verifies a leader by its start time in /proc; with none (0) it leaves the group alone. */
  get reaperEntry(): string {
    return `pg ${this.pid} ${this.#start ?? 0}`;
  }

  leaderReaped(): void {
    this.#reaped = true;
  }

  ready(): Promise<void> {
    return Promise.resolve();
  }

  terminate(): Promise<void> {
    this.#signalGroup('SIGTERM');
    return Promise.resolve();
  }

  /** All this mode can see: the leader's exit. */
  isEmpty(): boolean {
    return this.#reaped;
  }

  watch(): () => void {
    return () => {}; // the leader's exit nudges the grace
  }

  async kill(): Promise<boolean> {
    if (this.#reaped) return false;
    // Frozen, the group can neither fork nor die while tree-kill lists it.
    this.#signalGroup('SIGSTOP');
    await killTree(this.pid);
    this.#signalGroup('SIGKILL');
    await until(() => this.#reaped, GONE_BOUND_MS);
    return true;
  }

  /** At process exit nothing asynchronous runs: the group alone. */
  killNow(): void {
    this.#signalGroup('SIGKILL');
  }

  dispose(): Promise<void> {
    return Promise.resolve();
  }

  /** The group while the leader is unreaped; where there are no groups (Windows), the child alone. */
  #signalGroup(signal: NodeJS.Signals): void {
    if (this.#reaped) return;
    try {
      process.kill(-this.pid, signal);
    } catch {
      try { process.kill(this.pid, signal); } catch { /* gone, or a signal this platform lacks */ }
    }
  }
}

/** SIGKILL `pid` and every descendant tree-kill finds; resolves when it is done (never rejects). */
function killTree(pid: number): Promise<void> {
  // tree-kill spawns its walker with no 'error' listener: a missing `ps` would crash the host.
  if (!hasWalker()) return Promise.resolve();
  return new Promise((resolve) => treeKill!(pid, 'SIGKILL', () => resolve()));
}

/** `undefined` until looked up; then whether tree-kill can list children here. */
let walker: boolean | undefined;

function hasWalker(): boolean {
  if (walker !== undefined) return walker;
  if (process.platform === 'win32') return (walker = true);
  const command = WALKERS[process.platform];
  walker = command !== undefined && (process.env.PATH ?? '').split(delimiter).some((dir) => {
    try {
      accessSync(join(dir, command), constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
  return walker;
}

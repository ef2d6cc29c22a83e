/**
 * The hard stop of a process-group tree (group.ts): freeze, walk, SIGKILL, wait until every recorded
 * process is gone. (A cgroup's hard stop is one write to `cgroup.kill`, cgroup.ts.)
 */

import type { ProcStat } from '../base/proc.js';

/** What the sweep needs of a process-group tree (group.ts implements it). */
export interface Sweepable {
  signalGroup(signal: NodeJS.Signals): boolean;
  signalPid(pid: number, signal: NodeJS.Signals): boolean;
  walk(): void;
  live(): ProcStat[];
}

/** A process in uninterruptible sleep (D) dies only when its I/O returns: do not wait forever. */
export const GONE_BOUND_MS = 2000;
/** Spin on setImmediate this long before falling back to 1 ms timers: a SIGKILLed tree is usually gone within it. */
const SPIN_MS = 5;

/** SIGKILL what is left of the tree. Resolves whether anything was alive to kill (`forced`). */
export async function sweep(tree: Sweepable): Promise<boolean> {
  freeze(tree);
  const forced = tree.live().length > 0;
  tree.signalGroup('SIGKILL');
  for (const stat of tree.live()) tree.signalPid(stat.pid, 'SIGKILL');
  await until(() => tree.live().length === 0, GONE_BOUND_MS);
  return forced;
}

/**
 * SIGSTOP the group and every recorded process, then the children the walk finds under them, until
 * no new one: a stopped process can neither fork, nor escape, nor die and free its pid while it is
 * looked at.
 */
function freeze(tree: Sweepable): void {
  tree.signalGroup('SIGSTOP');
  const frozen = new Set<number>();
  for (;;) {
    tree.walk();
    const fresh = tree.live().filter((s) => !frozen.has(s.pid));
    if (fresh.length === 0) return;
    for (const stat of fresh) {
      tree.signalPid(stat.pid, 'SIGSTOP');
      frozen.add(stat.pid);
    }
  }
}

/** Resolves once `predicate` holds or `boundMs` passed. */
export async function until(predicate: () => boolean, boundMs: number): Promise<boolean> {
  const start = performance.now();
  while (!predicate()) {
    const elapsed = performance.now() - start;
    if (elapsed > boundMs) return false;
    await new Promise((r) => (elapsed < SPIN_MS ? setImmediate(r) : setTimeout(r, 1)));
  }
  return true;
}

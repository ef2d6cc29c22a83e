/**
 * The hard stop of one tree: SIGKILL the group, then sweep with tree-kill the descendants that
 * left it, then wait until every recorded pid is gone.
 */

import treeKill from 'tree-kill';
import type { ProcessTree } from './group.js';
import type { ProcStat } from './proc.js';

/** A process in uninterruptible sleep (D) dies only when its I/O returns: do not wait forever. */
const GONE_BOUND_MS = 2000;
/** Spin on setImmediate this long before falling back to 1 ms timers: most trees die in µs. */
const SPIN_MS = 5;

/** SIGKILL what is left of the tree. Resolves whether anything was alive to kill (`forced`). */
export async function sweep(tree: ProcessTree): Promise<boolean> {
  // Freeze first: a stopped process cannot fork, setsid or exit, so the walk sees all of it
  // and none of its pids can be reused before the SIGKILL (group.ts, rule 4).
  tree.signalGroup('SIGSTOP');
  tree.walkChildren();
  const forced = !tree.isEmpty();
  tree.signalGroup('SIGKILL');
  await sweepEscapees(tree);
  await until(() => tree.live().length === 0, GONE_BOUND_MS);
  return forced;
}

/** Escapees are out of reach of the group signal: freeze them, then tree-kill each escaped subtree. */
async function sweepEscapees(tree: ProcessTree): Promise<void> {
  if (!freezeEscapees(tree)) return;
  await Promise.all(subtreeRoots(tree.escapees()).map((stat) => killSubtree(stat.pid)));
  // Whatever tree-kill's ppid walk could not link (a parent already dead) is still recorded.
  for (const stat of tree.live()) tree.signalPid(stat.pid, 'SIGKILL');
}

/** SIGSTOP every escapee, then the children that the walk finds under them, until no new one. */
function freezeEscapees(tree: ProcessTree): boolean {
  const frozen = new Set<number>();
  for (let fresh = tree.escapees(); fresh.length > 0; fresh = tree.escapees().filter((s) => !frozen.has(s.pid))) {
    for (const stat of fresh) {
      tree.signalPid(stat.pid, 'SIGSTOP');
      frozen.add(stat.pid);
    }
    tree.walkChildren();
  }
  return frozen.size > 0;
}

/** The escapees whose parent is not itself an escapee: one tree-kill each covers the rest. */
function subtreeRoots(escapees: ProcStat[]): ProcStat[] {
  const pids = new Set(escapees.map((s) => s.pid));
  return escapees.filter((s) => !pids.has(s.ppid));
}

/** tree-kill never rejects here: a failed `ps` walk is covered by the direct SIGKILLs after it. */
function killSubtree(pid: number): Promise<void> {
  return new Promise((resolve) => treeKill(pid, 'SIGKILL', () => resolve()));
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

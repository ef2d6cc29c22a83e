/**
 * `killSpawned`: what `exec` does when something fails after the spawn but before a `Child` has
 * taken it over (its constructor throws), or while the tree is being made (`killLeader`): it dies
 * before the error surfaces, so a failure never leaks what was spawned (docs/exec.md).
 */

import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ChildProcess as Subprocess } from 'node:child_process';
import type { Registration } from './reaper.js';
import type { Tree } from './tree.js';

/**
 * SIGKILL `tree` now, then wait until its leader has exited and the rest is gone, and release it
 * and its place with the reaper.
 * Call it in the same synchronous run as the spawn (so before Node can have reaped the leader, the
 * rule that makes a group signal safe, group.ts) and with no 'exit' listener of a `Child` left on
 * `subprocess`. Never rejects.
 */
export async function killSpawned(subprocess: Subprocess, tree: Tree, registration: Registration): Promise<void> {
  try {
    tree.killNow();
  } catch { /* the sweep below tries again */ }
  await exitOf(subprocess);
  try {
    tree.leaderReaped();
    await tree.kill();
  } catch {
    try { tree.killNow(); } catch { /* nothing left to try */ }
  }
  await tree.dispose().catch(() => {});
  registration.release();
}

/**
 * The same before a `Tree` exists (making it is what failed): SIGKILL the leader's group, and its
 * cgroup when it has one, then wait for the leader's exit. Same timing rule as `killSpawned`.
 */
export async function killLeader(subprocess: Subprocess, cgroup: string | undefined): Promise<void> {
  if (cgroup !== undefined) try { writeFileSync(join(cgroup, 'cgroup.kill'), '1'); } catch { /* the group kill below */ }
  try { process.kill(-subprocess.pid!, 'SIGKILL'); } catch { /* gone already */ }
  await exitOf(subprocess);
}

/** Close the pipes (unread, they would keep their descriptors open for ever) and wait for the leader's exit. */
function exitOf(subprocess: Subprocess): Promise<void> {
  for (const stream of [subprocess.stdin, subprocess.stdout, subprocess.stderr]) stream?.destroy();
  if (subprocess.exitCode !== null || subprocess.signalCode !== null) return Promise.resolve();
  return new Promise<void>((resolve) => subprocess.once('exit', () => resolve()));
}

/**
 * Which containment a child gets, decided once per process: a cgroup of its own where this process
 * can create one (cgroup.ts), else its process group with the identity rule (group.ts).
 */

import { cgroupBase, cgroupsWork } from './cgroup.js';
import type { Containment } from './tree.js';

export type { Containment };

/** Environment variable that forces the fallback for every child of the process. */
const CONTAINMENT_ENV = 'FULLSTOP_CONTAINMENT';

/** `undefined` until probed; then the cgroup base directory, or `null` for no cgroups. */
let probed: string | null | undefined;

/**
 * The containment `exec` and `spawnBackground` use on this host: `'cgroup'` where this process can
 * create a cgroup v2 with `cgroup.kill` (Linux 5.14+, a writable cgroup2 hierarchy: root, or a
 * delegated subtree), else `'process-group'`. `FULLSTOP_CONTAINMENT=process-group` in the
 * environment forces the fallback. Probed once (a mkdir, one short `sh` run, an rmdir), then cached.
 *
 * @example
 * if (execContainment() !== 'cgroup') console.warn('a double-forked daemon can outlive a stop here');
 */
export function execContainment(): Containment {
  return cgroupDirectory() === undefined ? 'process-group' : 'cgroup';
}

/** Where to create a child's cgroup, or `undefined` in process-group mode. */
export function cgroupDirectory(): string | undefined {
  if (probed === undefined) probed = probe();
  return probed ?? undefined;
}

function probe(): string | null {
  if (process.platform !== 'linux' || process.env[CONTAINMENT_ENV] === 'process-group') return null;
  const base = cgroupBase();
  return base !== undefined && cgroupsWork(base) ? base : null;
}

/**
 * Which containment a child gets, decided once per process: a cgroup of its own where this process
 * can create one (cgroup.ts), else its process group with the identity rule (group.ts); where there
 * is no /proc (macOS, Windows), its group and the tree tree-kill finds (tree-kill.ts).
 */

import { existsSync } from 'node:fs';
import { isRefused, warnRefused } from '../base/refused.js';
import { cgroupBase, cgroupsWork } from './hierarchy.js';
import { reserve } from './reaper.js';
import type { Containment } from './tree.js';

export type { Containment };

/** Environment variable that forces a mode for every child of the process: `process-group` or `tree-kill`. */
const CONTAINMENT_ENV = 'FULLSTOP_CONTAINMENT';

/** `undefined` until probed; then the mode, and the cgroup base directory in cgroup mode. */
let probed: { readonly mode: Containment; readonly base?: string } | undefined;

/**
 * The containment `exec` and `spawnBackground` use on this host: `'cgroup'` where this process can
 * create a cgroup v2 with `cgroup.kill` (Linux 5.14+, a writable cgroup2 hierarchy: root, or a
 * delegated subtree); else `'process-group'` on Linux; `'tree-kill'` where there is no /proc
 * (macOS, Windows). `FULLSTOP_CONTAINMENT=process-group` (or `=tree-kill`) in the environment
 * forces that mode. Probed once (a mkdir, one short `sh` run, an rmdir), then cached.
 *
 * @example
 * if (execContainment() !== 'cgroup') console.warn('a double-forked daemon can outlive a stop here');
 */
export function execContainment(): Containment {
  probed ??= probe();
  return probed.mode;
}

/** Where to create a child's cgroup, or `undefined` when this host's mode is not cgroup. */
export function cgroupDirectory(): string | undefined {
  probed ??= probe();
  return probed.base;
}

function probe(): { mode: Containment; base?: string } {
  const forced = process.env[CONTAINMENT_ENV];
  if (forced === 'tree-kill' || process.platform !== 'linux' || !procReadable()) return { mode: 'tree-kill' };
  if (forced === 'process-group') return { mode: 'process-group' };
  const base = cgroupBase();
  return base !== undefined && probeCgroups(base) ? { mode: 'cgroup', base } : { mode: 'process-group' };
}

/** `cgroupsWork`, its cgroup known to the reaper from before it exists: a host killed meanwhile leaves none. */
function probeCgroups(base: string): boolean {
  const place = reserve();
  try {
    return cgroupsWork(base, (path) => place.add(`cg ${path}`));
  } finally {
    place.release();
  }
}

/** /proc is there and this runtime lets us read it (Deno without --allow-all does not: said once). */
function procReadable(): boolean {
  try {
    return existsSync('/proc/self/stat');
  } catch (e) {
    if (!isRefused(e)) throw e;
    warnRefused('/proc/self/stat', e);
    return false;
  }
}

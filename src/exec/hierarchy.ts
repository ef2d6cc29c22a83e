/**
 * The cgroup v2 hierarchy, for cgroup.ts: where this process may create cgroups, whether it can,
 * making and removing the cgroup of one child, and the shell line that joins a child to its cgroup
 * before it runs the command (launcher.ts).
 */

import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync } from 'node:fs';
import { readdir, rmdir } from 'node:fs/promises';
import { join } from 'node:path';

/**
 * The shell line that joins the shell running it (`$$`) to `cgroup`; a join that fails (it passed
 * the probe, so it should not) exits 125 with a message rather than run the command uncontained.
 */
export function joinLine(cgroup: string): string {
  const procs = shellQuote(join(cgroup, 'cgroup.procs'));
  return `echo $$ 2>/dev/null > ${procs} || { echo "fullstop: cannot join the cgroup of this child" >&2; exit 125; }`;
}

function shellQuote(text: string): string {
  return `'${text.replace(/'/g, `'\\''`)}'`;
}

/**
 * The directory under which this process may create cgroups: its own cgroup in the cgroup v2
 * hierarchy, found from /proc/self/mountinfo and /proc/self/cgroup (the mount point differs between
 * unified and hybrid hosts). `undefined` where there is none.
 */
export function cgroupBase(): string | undefined {
  let own: string | undefined;
  let mounts: string;
  try {
    own = /^0::(.*)$/m.exec(readFileSync('/proc/self/cgroup', 'utf8'))?.[1];
    mounts = readFileSync('/proc/self/mountinfo', 'utf8');
  } catch {
    return undefined;
  }
  if (own === undefined) return undefined;
  for (const line of mounts.split('\n')) {
    const [left, right] = line.split(' - ');
    if (right?.split(' ')[0] !== 'cgroup2') continue;
    const fields = left!.split(' ');
    const root = unescapeMount(fields[3]!);
    const mountPoint = unescapeMount(fields[4]!);
    if (root === '/') return join(mountPoint, own);
    if (own === root || own.startsWith(`${root}/`)) return join(mountPoint, own.slice(root.length));
  }
  return undefined;
}

/** mountinfo escapes space, tab, newline and backslash as octal. */
function unescapeMount(text: string): string {
  return text.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)));
}

let sequence = 0;

/**
 * Create a fresh cgroup for one child; throws when it cannot. `before(path)` runs before each
 * mkdir (the reaper's entry is written there, so a host killed right after the mkdir leaves no
 * cgroup nobody removes: reaper.ts).
 */
export function createCgroup(base: string, before?: (path: string) => void): string {
  for (;;) {
    const path = join(base, `fullstop-${process.pid}-${++sequence}`);
    before?.(path);
    try {
      mkdirSync(path);
      return path;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    }
  }
}

/**
 * Whether children can be contained in cgroups under `base`: a cgroup can be made there, it has
 * `cgroup.kill` (Linux 5.14+) and `cgroup.events`, and a process can join it. Costs one short
 * `sh` run, once per process (containment.ts caches the answer). `before` as for `createCgroup`.
 */
export function cgroupsWork(base: string, before?: (path: string) => void): boolean {
  let path: string;
  try {
    path = createCgroup(base, before);
  } catch {
    return false;
  }
  try {
    if (!existsSync(join(path, 'cgroup.kill')) || !existsSync(join(path, 'cgroup.events'))) return false;
    const joined = spawnSync('/bin/sh', ['-c', joinLine(path)], { stdio: 'ignore', timeout: 5000 });
    return joined.status === 0;
  } finally {
    removeCgroup(path);
  }
}

/** Remove `path` and any cgroup below it (a nested host may have made some); false while busy. */
export function removeCgroup(path: string): boolean {
  try {
    for (const entry of readdirSync(path, { withFileTypes: true })) {
      if (entry.isDirectory()) removeCgroup(join(path, entry.name));
    }
    rmdirSync(path);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'ENOENT';
  }
}

/** `removeCgroup`, off the main thread; never rejects. */
export async function removeCgroupOffThread(path: string): Promise<boolean> {
  try {
    for (const entry of await readdir(path, { withFileTypes: true })) {
      if (entry.isDirectory()) await removeCgroupOffThread(join(path, entry.name));
    }
    await rmdir(path);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'ENOENT';
  }
}

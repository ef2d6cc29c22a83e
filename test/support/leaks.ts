/**
 * Leak checks shared by the test files: threads of this process, descendants of this process,
 * and whether a pid is really gone.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { isReaper } from '../../dist/src/exec/reaper.js';

/** Threads of this process (a worker thread is one; libuv/V8 helpers are stable between checks). */
export function threadCount(): number {
  const status = readFileSync('/proc/self/status', 'utf8');
  return Number(/^Threads:\s+(\d+)/m.exec(status)![1]);
}

/** State letter of a pid from /proc/<pid>/stat, or undefined when there is no such process. */
export function procState(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0];
  } catch {
    return undefined;
  }
}

/** Gone = no /proc/<pid>, or a zombie waiting to be reaped. */
export function isGone(pid: number): boolean {
  const state = procState(pid);
  return state === undefined || state === 'Z' || state === 'X';
}

function parentOf(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  } catch {
    return undefined;
  }
}

/** Live (non-zombie) descendants of `root` (default: this process), leaving out the subtrees `skip` names. */
export function liveDescendants(root: number = process.pid, skip: (pid: number) => boolean = () => false): number[] {
  const children = new Map<number, number[]>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const pid = Number(name);
    const ppid = parentOf(pid);
    if (ppid === undefined) continue;
    (children.get(ppid) ?? children.set(ppid, []).get(ppid)!).push(pid);
  }
  const out: number[] = [];
  const walk = (pid: number) => {
    for (const child of children.get(pid) ?? []) {
      if (skip(child)) continue;
      if (!isGone(child)) out.push(child);
      walk(child);
    }
  };
  walk(root);
  return out;
}

/**
 * The live processes a tool started under `root`: its descendants without exec's reaper and what
 * the reaper runs (its awk), which live beside them while any child does (the leak checks still
 * count them, so they must be gone after).
 */
export function toolTree(root: number = process.pid): number[] {
  return liveDescendants(root, isReaper);
}

/** Poll `predicate` until true or `ms` passes (for liveness bounds only, never for ordering). */
export async function eventually(predicate: () => boolean, ms = 2000, what = 'condition'): Promise<void> {
  const deadline = Date.now() + ms;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/**
 * Reading the process table from /proc (Linux). Everything the tree walk and the identity rule
 * need is one line of /proc/<pid>/stat: state, parent, group, session and start time.
 *
 * A pid alone does not name a process: once reaped, the number can be handed to a stranger. A
 * (pid, start time) pair does, so every pid the library records is kept with its start time and
 * re-checked before it is signalled.
 *
 * The synchronous reads go through the reserve descriptor (fd-reserve.ts): a stop must be able to walk
 * the tree when the process has run out of descriptors.
 *
 * Cost: `readStat` and `childrenOf` touch one process each, so a walk costs O(the tree). Only
 * `scanSession` reads every process, and it reads them off the main thread (libuv's pool): the
 * stat read of a busy stranger can block for long (the kernel may wait on that process's memory map lock;
 * docs/exec.md, "Costs"), so not even a slice of the scan may run on the main thread.
 */

import { readdirSync, readFileSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { withReserve } from './fd-reserve.js';
import { isRefused, warnRefused } from './refused.js';

/** The fields of /proc/<pid>/stat the library uses. */
export interface ProcStat {
  readonly pid: number;
  /** One letter: R, S, D, T, Z, X, ... */
  readonly state: string;
  readonly ppid: number;
  readonly pgid: number;
  readonly sid: number;
  /** Clock ticks since boot at which the process started (field 22): with the pid, its identity. */
  readonly start: number;
}

/**
 * Ticks per second of the start time in /proc/<pid>/stat (USER_HZ). The kernel fixes it at 100 for
 * user space on every architecture Linux runs Node on, whatever its internal HZ.
 */
const USER_HZ = 100;
/** Stat reads of a scan in flight at once (libuv's pool has four threads by default). */
const SCAN_CONCURRENCY = 4;

/** The stat of `pid`, or undefined when there is no such process. */
export function readStat(pid: number): ProcStat | undefined {
  let line: string;
  try {
    line = withReserve(() => readFileSync(`/proc/${pid}/stat`, 'latin1'));
  } catch (e) {
    if (isRefused(e)) warnRefused(`/proc/${pid}/stat`, e);
    return undefined;
  }
  return parseStat(pid, line);
}

/** `readStat` read off the main thread (libuv's pool), for the reads a signal does not wait on. */
export async function readStatOffThread(pid: number): Promise<ProcStat | undefined> {
  let line: string;
  try {
    line = await readFile(`/proc/${pid}/stat`, 'latin1');
  } catch {
    return undefined;
  }
  return parseStat(pid, line);
}

function parseStat(pid: number, line: string): ProcStat {
  // The command name (field 2) may contain spaces and parentheses: parse from the last ')'.
  const f = line.slice(line.lastIndexOf(')') + 2).split(' ');
  return { pid, state: f[0]!, ppid: Number(f[1]), pgid: Number(f[2]), sid: Number(f[3]), start: Number(f[19]) };
}

/** A zombie has exited; only its parent's wait() is missing. For us it is gone. */
export function isDead(stat: ProcStat | undefined): boolean {
  return stat === undefined || stat.state === 'Z' || stat.state === 'X';
}

/** Now, in the ticks of `ProcStat.start`, rounded up; undefined without /proc. */
export function nowTicks(): number | undefined {
  try {
    return Math.ceil(Number(withReserve(() => readFileSync('/proc/uptime', 'latin1')).split(' ')[0]) * USER_HZ);
  } catch {
    return undefined;
  }
}

/**
 * Children of `pid`, from /proc/<pid>/task/<tid>/children: cost proportional to the tree, not to
 * the machine (a child forked by any thread is listed under that thread).
 */
export function childrenOf(pid: number): number[] {
  let tids: string[];
  try {
    tids = withReserve(() => readdirSync(`/proc/${pid}/task`));
  } catch {
    return [];
  }
  const out: number[] = [];
  for (const tid of tids) {
    let text: string;
    try {
      text = withReserve(() => readFileSync(`/proc/${pid}/task/${tid}/children`, 'latin1'));
    } catch {
      continue;
    }
    for (const word of text.split(' ')) if (word !== '' && word !== '\n') out.push(Number(word));
  }
  return out;
}

/**
 * Every live process of session `sid`, read off the main thread. `accept` gets each one as read;
 * a caller whose test depends on when the read happened must not use this (group.ts rule 3c does
 * not: it scans only after the reap, and its test holds whenever the read happened after it).
 */
export async function scanSession(sid: number, accept: (stat: ProcStat) => void): Promise<void> {
  let names: string[];
  try {
    names = await readdir('/proc');
  } catch {
    return; // no /proc (not Linux): nothing to find
  }
  const pids = names.filter((name) => name.charCodeAt(0) <= 57).map(Number); // digits: processes
  let next = 0;
  const reader = async () => {
    while (next < pids.length) {
      const stat = await readStatOffThread(pids[next++]!); // undefined: gone meanwhile
      if (!isDead(stat) && stat!.sid === sid) accept(stat!);
    }
  };
  await Promise.all(Array.from({ length: SCAN_CONCURRENCY }, reader));
}

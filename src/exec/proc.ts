/**
 * Reading the process table from /proc (Linux). Everything the tree walk and the identity rule
 * need is one line of /proc/<pid>/stat: state, parent, group, session and start time.
 *
 * A pid alone does not name a process: once reaped, the number can be handed to a stranger. A
 * (pid, start time) pair does, so every pid the library records is kept with its start time and
 * re-checked before it is signalled.
 *
 * Cost: `readStat` and `childrenOf` touch one process each, so a walk costs O(the tree). Only
 * `scanSession` reads every process, and it does so in small slices between which the event loop
 * runs: no caller ever holds the main thread for a scan of the whole machine.
 */

import { readdirSync, readFileSync } from 'node:fs';
import { readdir } from 'node:fs/promises';

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
/** Stat reads per slice of a scan: small enough that one slice never holds the loop for long. */
const SLICE = 32;

/** The stat of `pid`, or undefined when there is no such process. */
export function readStat(pid: number): ProcStat | undefined {
  let line: string;
  try {
    line = readFileSync(`/proc/${pid}/stat`, 'latin1');
  } catch {
    return undefined;
  }
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
    return Math.ceil(Number(readFileSync('/proc/uptime', 'latin1').split(' ')[0]) * USER_HZ);
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
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return [];
  }
  const out: number[] = [];
  for (const tid of tids) {
    let text: string;
    try {
      text = readFileSync(`/proc/${pid}/task/${tid}/children`, 'latin1');
    } catch {
      continue;
    }
    for (const word of text.split(' ')) if (word !== '' && word !== '\n') out.push(Number(word));
  }
  return out;
}

/**
 * Every live process of session `sid`, read in slices with the event loop running between them.
 * `accept` is called right after each read, in the same synchronous slice, so what it decides
 * holds for the state of the world at that read.
 */
export async function scanSession(sid: number, accept: (stat: ProcStat) => void): Promise<void> {
  let names: string[];
  try {
    names = await readdir('/proc');
  } catch {
    return; // no /proc (not Linux): nothing to find
  }
  for (let i = 0; i < names.length; i += SLICE) {
    for (const name of names.slice(i, i + SLICE)) {
      if (name.charCodeAt(0) > 57) continue; // not a digit: not a process
      const stat = readStat(Number(name));
      if (stat !== undefined && stat.sid === sid && !isDead(stat)) accept(stat);
    }
    await new Promise((r) => setImmediate(r));
  }
}

/**
 * Reading the process table from /proc (Linux). Everything the tree walk and the PID-reuse guards
 * need is one line of /proc/<pid>/stat: state, parent, group, session and start time.
 *
 * A pid alone does not name a process: once reaped, the number can be handed to a stranger. A
 * (pid, start time) pair does, so every pid the library records is kept with its start time and
 * re-checked before it is signalled.
 */

import { readdirSync, readFileSync } from 'node:fs';

/** The fields of /proc/<pid>/stat the library uses. */
export interface ProcStat {
  readonly pid: number;
  /** One letter: R, S, D, T, Z, X, ... */
  readonly state: string;
  readonly ppid: number;
  readonly pgid: number;
  readonly sid: number;
  /** Clock ticks since boot at which the process started: with the pid, its identity. */
  readonly start: string;
}

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
  return { pid, state: f[0]!, ppid: Number(f[1]), pgid: Number(f[2]), sid: Number(f[3]), start: f[19]! };
}

/** A zombie has exited; only its parent's wait() is missing. For us it is gone. */
export function isDead(stat: ProcStat | undefined): boolean {
  return stat === undefined || stat.state === 'Z' || stat.state === 'X';
}

/** The stat of every process (about 1.5 ms for ~90 processes here: used at signal time, not in loops). */
export function scanAll(): ProcStat[] {
  const out: ProcStat[] = [];
  let names: string[];
  try {
    names = readdirSync('/proc');
  } catch {
    return out; // no /proc (not Linux): the walk degrades to the group alone
  }
  for (const name of names) {
    if (name.charCodeAt(0) > 57) continue; // not a digit: not a process
    const stat = readStat(Number(name));
    if (stat !== undefined) out.push(stat);
  }
  return out;
}

/**
 * Children of `pid`, from /proc/<pid>/task/<tid>/children: cost proportional to the tree, not to
 * the machine, so the hard stop can afford it (a child forked by any thread is listed under it).
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
    for (const word of text.split(' ')) if (word !== '') out.push(Number(word));
  }
  return out;
}

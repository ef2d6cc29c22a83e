/**
 * Every process the probed command's tree had, seen from outside: the probe's own descendants by
 * /proc children links, polled while the command runs (and walked once more right at the cancel),
 * plus, after the stop, any process still in the command's group or session. A process counts as
 * the one seen only while its start time matches (a pid alone can be reused).
 *
 * The probe starts no other child process, so its descendants are exactly the command's trees,
 * but for exec's reaper (which watches them on exec's behalf and is skipped here).
 * Not seen: a process that double-forks away (to init, in a new session) between two polls.
 */

import { readFileSync } from 'node:fs';
import { childrenOf, isDead, readStat, scanSession } from '../base/proc.js';
import { isReaper } from '../exec/reaper.js';

const POLL_MS = 5;

export interface Survivor {
  pid: number;
  /** Its command line (or its name when /proc hides the command line). */
  command: string;
  /** Its start time (with the pid, its identity). */
  start: number;
}

export class TreeWatch {
  /** pid → start time of every process seen. */
  readonly #seen = new Map<number, number>();
  readonly #timer: NodeJS.Timeout;

  constructor() {
    this.#timer = setInterval(() => this.walk(), POLL_MS);
    this.#timer.unref();
  }

  /** Record the probe's live descendants now; returns how many there are. */
  walk(): number {
    let live = 0;
    const queue = childrenOf(process.pid).filter((pid) => !isReaper(pid));
    for (let pid = queue.pop(); pid !== undefined; pid = queue.pop()) {
      const stat = readStat(pid);
      if (isDead(stat)) continue;
      live++;
      this.#seen.set(pid, stat!.start);
      queue.push(...childrenOf(pid));
    }
    return live;
  }

  /** Stop polling (idempotent). */
  stop(): void {
    clearInterval(this.#timer);
  }

  /**
   * Stop polling; record what is left of `leader`'s session (exec makes the child a session
   * leader, and its group lies within that session); return what is still alive.
   */
  async finish(leader: number): Promise<Survivor[]> {
    this.stop();
    this.walk();
    await scanSession(leader, (stat) => {
      // scanSession passes live processes only.
      if (stat.pid !== process.pid) this.#seen.set(stat.pid, stat.start);
    });
    return [...this.#seen].filter(([pid, start]) => isAlive(pid, start)).map(([pid, start]) => ({ pid, start, command: commandOf(pid) }));
  }
}

/** `pid` is alive and is still the process whose start time was recorded. */
export function isAlive(pid: number, start: number): boolean {
  const stat = readStat(pid);
  return !isDead(stat) && stat!.start === start;
}

function commandOf(pid: number): string {
  try {
    const line = readFileSync(`/proc/${pid}/cmdline`, 'latin1').split('\0').filter(Boolean).join(' ');
    if (line !== '') return line;
    return readFileSync(`/proc/${pid}/comm`, 'latin1').trim();
  } catch {
    return '?';
  }
}

/**
 * `ProcessGroupTree`: the containment of one child where no cgroup can be made (containment.ts):
 * its process group plus every descendant recorded by identity, and the only place in this mode
 * that sends a signal to any of them.
 *
 * The child leads its group: `detached: true` makes it call setsid() before exec, so its
 * pid P is also its group and session id.
 *
 * Identity rule (never signal a process the library did not start), enforced here and nowhere else:
 * 1. Never signal a pid <= 1: `kill(-1)` means every process we may signal, `kill(0)` our group.
 * 2. Signal the group -P only while Node has not reaped the leader. Until then the leader, alive or
 *    a zombie, holds the number P, so no other process can have it, and every member of group P is
 *    in session P, hence forked from the child. Node reaps only on the main thread, between two
 *    callbacks, so "not reaped" cannot change under a synchronous signal. Once the leader is reaped,
 *    P can be handed to a stranger who then leads a group P of its own: a pgid proves nothing.
 * 3. Otherwise signal only recorded processes, and only while their start time still matches (a
 *    pid whose start time changed names another process). A process is recorded when it is:
 *    a. the leader, at spawn;
 *    b. listed in /proc/<X>/task/<tid>/children of a recorded X that is still itself after the read
 *       and whose child's stat still names X as its parent (the walk, O(the tree));
 *    c. a live member of session P (sid = P) that started no earlier than the leader and no later than
 *       the tick in which the leader was reaped. Until then P named our session and nothing else;
 *       a stranger's session P can only begin after the reap, and everything in it starts after it.
 *       Only the members a walk cannot reach (orphans left in the session when their parent died)
 *       need this, so the session is scanned only once the leader is reaped and its group still has
 *       a member, off the main thread, never on the signal path.
 * Not guaranteed: a process that dies, and whose pid is reused, between the start-time check and the
 * kill (a few µs; the hard stop SIGSTOPs first, and a stopped process cannot die by itself); a
 * stranger that gets pid P within the same clock tick (10 ms) as the reap, when scanning (rule 3c).
 */

import { childrenOf, isDead, nowTicks, readStat, scanSession, type ProcStat } from '../base/proc.js';
import { holdReserve } from '../base/fd-reserve.js';
import type { Tree } from './tree.js';
import { sweep } from './sweep.js';

export class ProcessGroupTree implements Tree {
  readonly mode = 'process-group' as const;
  readonly pid: number;
  /** Start time of the leader; `undefined` when /proc cannot be read (then only rule 2 applies). */
  readonly #leaderStart: number | undefined;
  /** Every process recorded (rule 3), pid → start time. The dead stay: the start time filters them. */
  readonly #known = new Map<number, number>();
  /** `false` until Node has reaped the leader (rule 2). */
  #reaped = false;
  /** The tick in which the leader was reaped (rule 3c); `undefined` before, or without /proc. */
  #reapedAt: number | undefined;
  /** The session scan of rule 3c; `undefined` when none runs. */
  #scan: Promise<void> | undefined;
  /** Releases the reserve descriptor the walk falls back on when the process has none left. */
  readonly #releaseReserve: () => void;

  constructor(pid: number) {
    if (!Number.isInteger(pid) || pid <= 1) throw new RangeError(`pid: expected a child pid > 1, got ${pid}`);
    this.pid = pid;
    this.#releaseReserve = holdReserve();
    // The leader is not reaped before the event loop runs again, so it is readable here.
    const stat = readStat(pid);
    this.#leaderStart = stat?.start;
    this.#record(stat);
  }

  get reaperEntry(): string {
    return `pg ${this.pid} ${this.#leaderStart ?? 0}`;
  }

  leaderReaped(): void {
    this.#reaped = true;
    this.#reapedAt = nowTicks();
    // Signal 0 delivers nothing; it only says whether the group still had a member at the reap,
    // that is whether orphans may be left that no walk can reach (rule 3c).
    if (this.#leaderStart !== undefined && this.#reapedAt !== undefined && probeGroup(this.pid)) this.#scanSession();
  }

  ready(): Promise<void> {
    return this.#scan ?? Promise.resolve();
  }

  terminate(): Promise<void> {
    // Walk before anyone dies of the SIGTERM: a parent that dies hands its children to init, where
    // no walk finds them any more.
    this.walk();
    this.signalGroup('SIGTERM');
    const signalled = new Set<number>();
    const termOutsiders = () => {
      for (const stat of this.#outsideGroupSignal()) {
        if (!signalled.has(stat.pid)) this.signalPid(stat.pid, 'SIGTERM');
        signalled.add(stat.pid);
      }
    };
    termOutsiders();
    return this.#scan === undefined ? Promise.resolve() : this.#scan.then(termOutsiders);
  }

  /** The walk reads one small file per process of the tree, O(the tree): done in place. */
  isEmpty(): boolean {
    if (!this.#reaped || this.#scan !== undefined) return false;
    this.walk();
    return this.live().length === 0;
  }

  watch(): () => void {
    return () => {}; // no event says a group emptied: the grace polls (the leader's exit nudges it)
  }

  async kill(): Promise<boolean> {
    await this.ready();
    return sweep(this);
  }

  killNow(): void {
    this.signalGroup('SIGKILL');
    for (const stat of this.#outsideGroupSignal()) this.signalPid(stat.pid, 'SIGKILL');
  }

  dispose(): Promise<void> {
    this.#releaseReserve();
    return Promise.resolve();
  }

  /** Signal the whole group, while rule 2 allows it. False when nothing was signalled. */
  signalGroup(signal: NodeJS.Signals): boolean {
    if (this.#reaped) return false;
    try {
      process.kill(-this.pid, signal);
      return true;
    } catch {
      return false;
    }
  }

  /** Signal one recorded process, if it is still the one recorded (rules 1 and 3). */
  signalPid(pid: number, signal: NodeJS.Signals): boolean {
    if (pid <= 1 || this.#identify(readStat(pid)) === undefined) return false;
    try {
      process.kill(pid, signal);
      return true;
    } catch {
      return false;
    }
  }

  /** Record the descendants of every live recorded process (rule 3b), recursively: O(the tree). */
  walk(): void {
    const queue = this.live().map((s) => s.pid);
    for (let pid = queue.pop(); pid !== undefined; pid = queue.pop()) {
      const children = childrenOf(pid);
      // The list is X's only if X is still itself after reading it.
      if (this.#identify(readStat(pid)) === undefined) continue;
      for (const child of children) {
        const stat = readStat(child);
        if (isDead(stat) || stat!.ppid !== pid || this.#known.get(child) === stat!.start) continue;
        this.#record(stat);
        queue.push(child);
      }
    }
  }

  /** Recorded processes that are still alive and still the ones recorded. */
  live(): ProcStat[] {
    const out: ProcStat[] = [];
    for (const pid of this.#known.keys()) {
      const stat = this.#identify(readStat(pid));
      if (stat !== undefined) out.push(stat);
    }
    return out;
  }

  /** Live recorded processes a group signal does not reach: outside the group, or all once it is off limits. */
  #outsideGroupSignal(): ProcStat[] {
    return this.live().filter((s) => this.#reaped || s.pgid !== this.pid);
  }

  #scanSession(): void {
    const scan: Promise<void> = scanSession(this.pid, (stat) => {
      if (stat.start >= this.#leaderStart! && stat.start <= this.#reapedAt!) this.#record(stat);
    }).finally(() => { if (this.#scan === scan) this.#scan = undefined; });
    this.#scan = scan;
  }

  #record(stat: ProcStat | undefined): void {
    if (!isDead(stat) && stat!.pid > 1) this.#known.set(stat!.pid, stat!.start);
  }

  /** `stat` if it is alive and is the process recorded under its pid, else undefined. */
  #identify(stat: ProcStat | undefined): ProcStat | undefined {
    return !isDead(stat) && this.#known.get(stat!.pid) === stat!.start ? stat : undefined;
  }
}

/** Whether group `pgid` has a member (zombies count); signal 0 delivers nothing. */
function probeGroup(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

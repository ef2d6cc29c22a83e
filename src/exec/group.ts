/**
 * `ProcessTree`: one child's process group plus every descendant seen in or out of it, and the
 * only place that sends a signal to any of them.
 *
 * The child leads its group: execa's `detached: true` makes it call setsid() before exec, so its
 * pid is also its group and session id. Processes leave the group (setsid, setpgid), and a parent
 * killed by SIGTERM hands its children to init, where no ppid link finds them any more; so the tree
 * is walked at signal time and the pids are recorded, each with its start time.
 *
 * Safety rules (issue #4), enforced here and nowhere else:
 * 1. Never signal a pid <= 1: `kill(-1)` means every process we may signal, `kill(0)` our group.
 * 2. Never signal a group the library did not create: the only group ever signalled is `pgid`,
 *    the pid of a child it spawned detached.
 * 3. Never signal the group once it is known empty. While the group has a member, even a zombie,
 *    the kernel keeps its number reserved, so a group signal cannot reach a stranger; once it is
 *    empty the number can be reused. `#groupEmpty` latches the first time emptiness is seen.
 * 4. Never signal a recorded pid whose start time has changed: that number now names another
 *    process. Not guaranteed: a pid that dies and is reused between the check and the kill (a
 *    few µs). The hard stop narrows that further by SIGSTOPping first: a stopped process cannot
 *    die by itself, so its pid cannot be reused before the SIGKILL.
 */

import { childrenOf, isDead, readStat, scanAll, type ProcStat } from './proc.js';

export class ProcessTree {
  /** The group (and session) the child leads: its pid. */
  readonly pgid: number;
  /** Every process seen in the tree, pid → start time. Grows at each walk; the dead stay (rule 4 filters them). */
  readonly #known = new Map<number, string>();
  /** Latched by rule 3. */
  #groupEmpty = false;
  /** `false` until Node has reaped the leader (its 'exit' event): until then the group is not empty. */
  leaderExited = false;

  constructor(pid: number) {
    if (!Number.isInteger(pid) || pid <= 1) throw new RangeError(`pid: expected a child pid > 1, got ${pid}`);
    this.pgid = pid;
    // The leader is not reaped before the event loop runs again, so it is readable here.
    this.#record(readStat(pid));
  }

  /** Signal the whole group (rules 1–3). False when nothing was signalled. */
  signalGroup(signal: NodeJS.Signals | 0): boolean {
    if (this.#groupEmpty) return false;
    try {
      process.kill(-this.pgid, signal);
      return true;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ESRCH') this.#groupEmpty = true;
      return false;
    }
  }

  /** Signal one recorded process, if it is still the one recorded (rules 1 and 4). */
  signalPid(pid: number, signal: NodeJS.Signals): boolean {
    if (pid <= 1 || this.#identify(readStat(pid)) === undefined) return false;
    try {
      process.kill(pid, signal);
      return true;
    } catch {
      return false;
    }
  }

  /**
   * The signal-time walk, over the whole process table: everything in the group or the session,
   * every recorded process still alive, and all their descendants by ppid.
   */
  walkAll(): void {
    const stats = scanAll();
    const byParent = new Map<number, ProcStat[]>();
    const pending: ProcStat[] = [];
    for (const stat of stats) {
      if (isDead(stat)) continue;
      (byParent.get(stat.ppid) ?? byParent.set(stat.ppid, []).get(stat.ppid)!).push(stat);
      if (stat.pgid === this.pgid || stat.sid === this.pgid || this.#identify(stat) !== undefined) pending.push(stat);
    }
    const seen = new Set<number>();
    for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
      if (seen.has(next.pid)) continue;
      seen.add(next.pid);
      this.#record(next);
      pending.push(...(byParent.get(next.pid) ?? []));
    }
  }

  /** A cheaper walk for the hard stop: the children of every recorded live process, recursively. */
  walkChildren(): void {
    const queue = this.live().map((s) => s.pid);
    for (let pid = queue.pop(); pid !== undefined; pid = queue.pop()) {
      for (const child of childrenOf(pid)) {
        const stat = readStat(child);
        if (isDead(stat) || this.#known.get(child) === stat!.start) continue;
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

  /** Live recorded processes outside the group: a group signal does not reach them. */
  escapees(): ProcStat[] {
    return this.live().filter((s) => s.pgid !== this.pgid);
  }

  /** True once no live process is left in the group (latches, rule 3). */
  groupIsEmpty(): boolean {
    if (this.#groupEmpty) return true;
    if (!this.leaderExited) return false;
    if (!this.signalGroup(0)) return this.#groupEmpty;
    // Signal 0 reached someone, maybe only zombies nobody reaps (PID 1 here does not).
    if (this.live().some((s) => s.pgid === this.pgid)) return false;
    const member = scanAll().find((s) => s.pgid === this.pgid && !isDead(s));
    if (member !== undefined) {
      this.#record(member);
      return false;
    }
    this.#groupEmpty = true;
    return true;
  }

  /** Nothing of the tree is alive: the group is empty and no recorded escapee lives. */
  isEmpty(): boolean {
    return this.groupIsEmpty() && this.escapees().length === 0;
  }

  /** Synchronous last resort (process exit): SIGKILL the group and every live recorded escapee. */
  killNow(): void {
    this.signalGroup('SIGKILL');
    for (const stat of this.escapees()) this.signalPid(stat.pid, 'SIGKILL');
  }

  #record(stat: ProcStat | undefined): void {
    if (!isDead(stat) && stat!.pid > 1) this.#known.set(stat!.pid, stat!.start);
  }

  /** `stat` if it is alive and is the process recorded under its pid, else undefined. */
  #identify(stat: ProcStat | undefined): ProcStat | undefined {
    return !isDead(stat) && this.#known.get(stat!.pid) === stat!.start ? stat : undefined;
  }
}

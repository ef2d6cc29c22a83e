/**
 * cgroup v2 containment: each child in a cgroup of its own, joined before it can fork.
 *
 * The kernel tracks cgroup membership exactly and for ever: whatever a process does (setsid,
 * double fork, its parent's death), it and everything it forks stay in the cgroup, and nothing else
 * is ever in it. So the hard stop is one write of "1" to `cgroup.kill` (SIGKILL to every member,
 * descendant cgroups included), through a descriptor opened at the spawn (a process out of
 * descriptors can still write it), it can never reach a stranger, and `cgroup.events` saying
 * `populated 0` is proof that the tree is gone, without reading /proc. This is how systemd's
 * `KillMode=control-group` contains a service.
 *
 * Joining: Node cannot move a child into a cgroup between fork and exec, so the child starts as
 * the launcher (launcher.ts): `/bin/sh`, which joins (a builtin, no fork), waits for the host's go,
 * then execs the command in the same process, so the pid, argv[0], exit code and signal are the
 * command's own (and so is the environment). Node also writes the pid right after the spawn
 * returns, so the child is a member before any stop can run.
 */

import { closeSync, constants, openSync, readFileSync, readSync, watch, writeSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { removeCgroupOffThread } from './hierarchy.js';
import { isDead, readStatOffThread } from '../base/proc.js';
import { holdReserve, withReserve } from '../base/fd-reserve.js';
import { GONE_BOUND_MS, until } from './sweep.js';
import type { Tree } from './tree.js';

/** How long a cgroup whose last member is stuck in D state is retried for removal. */
const REMOVE_RETRY_MS = 10_000;
/**
 * How long after the group's SIGTERM the members outside the group are looked for, if the cgroup
 * is still populated by then: a tree that obeys SIGTERM is gone before, and the search (reads of
 * cgroup.procs and of each member's stat) is never started.
 */
const OUTSIDERS_AFTER_MS = 5;
/** `cgroup.events` is two short lines ("populated N", "frozen N"). */
const EVENTS_BYTES = 64;
/** How often the hard stop kills again while the cgroup is still populated. */
const KILL_RETRY_MS = 50;

export class CgroupTree implements Tree {
  readonly mode = 'cgroup' as const;
  readonly pid: number;
  /** The child's cgroup directory. */
  readonly path: string;
  /** `false` until Node has reaped the leader: until then the group -pid is certainly the child's. */
  #reaped = false;
  /** `cgroup.events`, open from the first look until dispose; `undefined` before, `null` once closed. */
  #events: number | null | undefined;
  readonly #eventsBuffer = Buffer.alloc(EVENTS_BYTES);
  /**
   * `cgroup.kill`, open from the spawn until dispose (`undefined`: the open failed, `null`: closed),
   * so that the hard stop opens nothing: a process out of descriptors (EMFILE) can still kill.
   */
  #kill: number | null | undefined;
  /** Releases the reserve descriptor the fallback's read of `cgroup.procs` uses. */
  readonly #releaseReserve = holdReserve();

  constructor(pid: number, path: string) {
    this.pid = pid;
    this.path = path;
    // Opened now, at the spawn, so that no stop ever pays for the open, nor fails for want of a descriptor.
    try { this.#events = openSync(join(path, 'cgroup.events'), 'r'); } catch { /* opened (or found gone) at the first look */ }
    try { this.#kill = openSync(join(path, 'cgroup.kill'), constants.O_WRONLY); } catch { /* the hard stop opens it, or falls back */ }
  }

  get reaperEntry(): string {
    return `cg ${this.path}`;
  }

  leaderReaped(): void {
    this.#reaped = true;
  }

  ready(): Promise<void> {
    return Promise.resolve();
  }

  /**
   * SIGTERM the group while the leader is unreaped (see group.ts, rule 2), at once; then each member
   * of the cgroup outside it. The members and their groups are read off the main thread (a stop
   * must not hold the event loop for reads; the hard stop, `cgroup.kill`, reaches every member
   * anyway). Each outsider is signalled only if its cgroup still lists it, read right before the
   * kill: a member could die and its pid be reused while the reads were in flight, and a pid a
   * cgroup lists names one of its members. (As before, a member that dies and whose pid is reused
   * in the µs between that read and the kill is not guarded; `cgroup.kill` has no such window.)
   */
  terminate(): Promise<void> {
    const groupSignalled = !this.#reaped;
    if (groupSignalled) {
      try { process.kill(-this.pid, 'SIGTERM'); } catch { /* already gone */ }
    }
    // The search for members outside the group is not part of the stop's synchronous part: each of
    // its reads wakes a thread of libuv's pool, which costs the event loop more than the signal.
    // With the group signalled it waits a little, and is skipped when the tree is gone by then.
    // A plain timer, not `timers/promises`: this runs inside `cancel()`, where the promise timer
    // cost twice as much.
    return new Promise<void>((resolve) => {
      setTimeout(() => {
        (this.isEmpty() ? Promise.resolve() : this.#terminateOutsiders(groupSignalled))
          .catch(() => { /* the grace and the hard stop cover it */ })
          .then(resolve);
      }, groupSignalled ? OUTSIDERS_AFTER_MS : 0);
    });
  }

  async #terminateOutsiders(groupSignalled: boolean): Promise<void> {
    const outsiders = new Map<string, number[]>();
    for (const [dir, pids] of await membersOffThread(this.path)) {
      const stats = await Promise.all(pids.map(readStatOffThread));
      // A member of the group got the group's SIGTERM: one signal each, as for a plain kill(-pgid).
      const left = stats.filter((stat) => !isDead(stat) && !(groupSignalled && stat!.pgid === this.pid)).map((stat) => stat!.pid);
      if (left.length > 0) outsiders.set(dir, left);
    }
    for (const [dir, pids] of outsiders) {
      const listed = new Set(procsOf(dir));
      for (const pid of pids) {
        if (pid > 1 && listed.has(pid)) try { process.kill(pid, 'SIGTERM'); } catch { /* already gone */ }
      }
    }
  }

  /**
   * One `pread` of `cgroup.events` through a descriptor kept open (the kernel renders the file
   * anew at offset 0): a few µs, cheaper than starting any asynchronous read.
   */
  isEmpty(): boolean {
    try {
      if (this.#events === null) return true; // disposed: the cgroup is gone
      this.#events ??= openSync(join(this.path, 'cgroup.events'), 'r');
      const buffer = this.#eventsBuffer;
      return isUnpopulated(buffer.toString('latin1', 0, readSync(this.#events, buffer, 0, EVENTS_BYTES, 0)));
    } catch {
      return true; // no such cgroup any more (ENOENT before the open, ENODEV after)
    }
  }

  /** The kernel reports each change of `cgroup.events` (`populated 1` → `0`) as a file modification. */
  watch(nudge: () => void): () => void {
    try {
      const watcher = watch(join(this.path, 'cgroup.events'), { persistent: false }, () => nudge());
      watcher.on('error', () => {}); // the cgroup was removed: the poll covers the rest
      return () => watcher.close();
    } catch {
      return () => {}; // no inotify watch left: the grace polls
    }
  }

  /** `killNow`, then again every KILL_RETRY_MS while the cgroup is populated, up to GONE_BOUND_MS. */
  async kill(): Promise<boolean> {
    const forced = !this.isEmpty();
    this.killNow();
    let killedAt = performance.now();
    await until(() => {
      if (this.isEmpty()) return true;
      if (performance.now() - killedAt >= KILL_RETRY_MS) {
        this.killNow();
        killedAt = performance.now();
      }
      return false;
    }, GONE_BOUND_MS);
    return forced;
  }

  /**
   * One write of "1" to `cgroup.kill` through the descriptor opened at the spawn. Should it fail
   * (never opened, or the child made its cgroup threaded, where `cgroup.kill` refuses), SIGKILL the
   * group while the leader is unreaped and every pid the cgroup lists (read through the reserve).
   */
  killNow(): void {
    if (this.#writeKill()) return;
    if (!this.#reaped) try { process.kill(-this.pid, 'SIGKILL'); } catch { /* already gone */ }
    for (const pid of procsOf(this.path)) {
      if (pid > 1) try { process.kill(pid, 'SIGKILL'); } catch { /* already gone */ }
    }
  }

  #writeKill(): boolean {
    if (this.#kill === null) return false;
    try {
      this.#kill ??= openSync(join(this.path, 'cgroup.kill'), constants.O_WRONLY);
      writeSync(this.#kill, '1', 0);
      return true;
    } catch {
      return false;
    }
  }

  /** Resolves once the cgroup is removed, or found busy (then retried in the background). */
  async dispose(): Promise<void> {
    if (typeof this.#events === 'number') closeSync(this.#events);
    if (typeof this.#kill === 'number') closeSync(this.#kill);
    this.#events = null;
    this.#kill = null;
    this.#releaseReserve();
    // Off the main thread: removing a cgroup can take the kernel a while.
    if (await removeCgroupOffThread(this.path)) return;
    // A member still in uninterruptible sleep keeps the cgroup busy: retry, without holding the host.
    const deadline = performance.now() + REMOVE_RETRY_MS;
    const retry = async (): Promise<void> => {
      if (!(await removeCgroupOffThread(this.path)) && performance.now() <= deadline) setTimeout(retry, 100).unref();
    };
    setTimeout(retry, 100).unref();
  }
}

function isUnpopulated(events: string): boolean {
  return /^populated 0$/m.test(events);
}

/** The pids `dir`'s own cgroup.procs lists now (none when it is gone). */
function procsOf(dir: string): number[] {
  try {
    return parseProcs(withReserve(() => readFileSync(join(dir, 'cgroup.procs'), 'latin1')));
  } catch {
    return [];
  }
}

function parseProcs(text: string): number[] {
  const out: number[] = [];
  for (const word of text.split('\n')) if (word !== '') out.push(Number(word));
  return out;
}

/** The pids of `path` and of every cgroup below it, by cgroup directory, read off the main thread. */
async function membersOffThread(path: string, into = new Map<string, number[]>()): Promise<Map<string, number[]>> {
  try {
    into.set(path, parseProcs(await readFile(join(path, 'cgroup.procs'), 'latin1')));
    for (const entry of await readdir(path, { withFileTypes: true })) {
      if (entry.isDirectory()) await membersOffThread(join(path, entry.name), into);
    }
  } catch {
    // removed under us: no members
  }
  return into;
}

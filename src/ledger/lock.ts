/**
 * One writer per ledger file, across processes and hosts: an advisory lock file `<ledger>.lock`
 * that names its holder (pid, the process's start time, host, machine) and how long it may go
 * unrefreshed, next to the real file (the caller resolves symlinks first, so two paths to one file
 * meet one lock). `Ledger.open` takes it before reading the file and `close()` gives it back.
 *
 * Two ways to know a holder is gone, used together. On the holder's own machine, its pid and start
 * time (from /proc, a pair the kernel never repeats): a SIGKILLed holder's lock is taken over at
 * once. Anywhere else (another host sharing the volume, or a container since restarted, which has
 * a new hostname and pid namespace), the age of the lock: the holder touches it every third of its
 * stale time, as proper-lockfile does with mtime, so a lock not touched for the stale time it
 * names has no live holder.
 *
 * Rules:
 * 1. The lock file is created whole or not at all: its content is written to a private temp file
 *    that is then hard-linked to the lock path (`link` fails with EEXIST if any lock is there). So
 *    of two openers, one links and the other finds its lock (takeovers included: rule 4).
 * 2. The holder keeps it fresh: every `staleMs / 3` it reads the lock and, if still its own,
 *    touches its mtime (a timer, unref'd, stopped by `release`). The lock names its `staleMs`, so
 *    an opener judges it by the holder's own promise, not by its own option.
 * 3. A holder is gone when (a) it ran on this machine (same host name and, where the lock says,
 *    the same boot and pid namespace) and no process has its pid and start time, at once; or
 *    (b) otherwise, its lock's mtime is older than the `staleMs` it names (by this host's clock).
 *    A live process on this machine is never gone, however old its lock; a lock whose liveness
 *    cannot be read and that is not stale counts as alive.
 * 4. A stale lock is taken over by one opener at a time: the one that creates `<lock>.takeover`
 *    (as in rule 1; a dead taker's is cleared after `TAKEOVER_STALE_MS`) looks again, and if the
 *    lock is still the very one it judged (same content, inode and mtime) renames it to a private
 *    name; only if what was moved is still that lock is it deleted, else it is put back. The
 *    others wait and look again. The taker then links its own lock as in rule 1, so of several
 *    takers exactly one wins, and a lock another opener linked meanwhile is never moved.
 * 5. A holder that finds another lock in its place has lost it (it was taken over after the
 *    holder went unrefreshed for its stale time: a process stopped or frozen that long): `onLost`
 *    is told once, and the refreshes stop. One it finds missing it links again (rule 1).
 *
 * Not guaranteed: the lock is advisory (a writer that does not use `Ledger` is not stopped); on
 * systems without /proc a holder on this machine is only known gone when its pid no longer exists;
 * hosts sharing a volume must agree on the time within the stale time less its third; a holder
 * frozen past its stale time writes until its next refresh finds the lock lost; and when such a
 * holder refreshes its lock between a taker's look and rename, the taker puts it back, but if a
 * new opener linked in that instant, the holder learns it has lost the lock at its next refresh;
 * a taker killed mid-takeover leaves `<lock>.takeover`, which holds other openers up to
 * `TAKEOVER_STALE_MS`, and two openers clearing it at once may both take over.
 */

import { randomBytes } from 'node:crypto';
import { readFileSync, readlinkSync } from 'node:fs';
import { link, readFile, rename, stat, unlink, utimes, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { resolve } from 'node:path';
import { readStat } from '../base/proc.js';

/** A takeover's `<lock>.takeover` older than this is a dead taker's, and is cleared (rule 4), in ms. */
const TAKEOVER_STALE_MS = 2_000;
/** How long `lockLedger` goes on looking while takeovers are under way, in ms, and how long it waits between looks. */
const LOCK_WAIT_MS = 5_000;
const LOCK_POLL_MS = 20;

/** Who holds a ledger. */
interface LockHolder {
  pid: number;
  /** Start time of the process in clock ticks since boot (/proc/<pid>/stat field 22); 0 when unknown. */
  startTime: number;
  host: string;
  /** Boot id and pid namespace of the holder's machine; absent in locks of earlier versions, '' when unknown. */
  machine?: string;
  /** How long the lock may go unrefreshed before it is stale, in ms (rule 2); absent in locks of earlier versions. */
  staleMs?: number;
}

/** What `lockLedger` is told. */
export interface LockOptions {
  /** The holder's stale time in ms: it refreshes the lock every third of it. */
  staleMs: number;
  /** Told once when the lock was found taken over by another holder (rule 5). */
  onLost(error: Error): void;
}

/** A held lock: `release()` stops its refreshes and removes it if it is still ours. */
export interface LedgerLock {
  readonly path: string;
  release(): Promise<void>;
}

/** Start time of `pid` from /proc, or undefined when there is no such process (or no /proc). */
function startTimeOf(pid: number): number | undefined {
  return readStat(pid)?.start;
}

/** This machine as a lock names it: boot id and pid namespace ('' where /proc cannot say). Neither changes while the process lives. */
let machine: string | undefined;
function thisMachine(): string {
  if (machine !== undefined) return machine;
  try {
    machine = `${readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim()} ${readlinkSync('/proc/self/ns/pid')}`;
  } catch {
    machine = '';
  }
  return machine;
}

function self(staleMs: number): LockHolder {
  return { pid: process.pid, startTime: startTimeOf(process.pid) ?? 0, host: hostname(), machine: thisMachine(), staleMs };
}

/** Rule 3 (a): the holder ran on this machine, so its pid says whether it lives. */
function onThisMachine(holder: LockHolder): boolean {
  if (holder.host !== hostname()) return false;
  const mine = thisMachine();
  return holder.machine === undefined || holder.machine === '' || mine === '' || holder.machine === mine;
}

/** Rule 3 (a): true when the process is certainly gone, false when alive, undefined when it cannot say. */
function processGone(holder: LockHolder): boolean | undefined {
  if (holder.pid === process.pid) return false;
  const start = startTimeOf(holder.pid);
  if (start !== undefined) return holder.startTime === 0 ? undefined : start !== holder.startTime;
  try {
    process.kill(holder.pid, 0);
    return false;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'ESRCH' ? true : undefined;
  }
}

/** Undefined when the holder is gone (rule 3), else why it counts as alive (for the error). */
function whyAlive(holder: LockHolder, ageMs: number, defaultStaleMs: number): string | undefined {
  if (onThisMachine(holder)) {
    const gone = processGone(holder);
    if (gone === true) return undefined;
    if (gone === false) return 'a live process on this machine';
  }
  const staleMs = holder.staleMs ?? defaultStaleMs;
  if (ageMs > staleMs) return undefined;
  return `its lock was refreshed ${Math.max(0, Math.round(ageMs))} ms ago; a lock not refreshed for ${staleMs} ms is taken over`;
}

function parseHolder(text: string): LockHolder | undefined {
  try {
    const v = JSON.parse(text) as Partial<LockHolder>;
    if (Number.isSafeInteger(v.pid) && typeof v.startTime === 'number' && typeof v.host === 'string'
      && (v.staleMs === undefined || (typeof v.staleMs === 'number' && v.staleMs >= 0))) return v as LockHolder;
  } catch {
    // not a lock we wrote
  }
  return undefined;
}

/** How a holder is named in an error. */
function describeHolder(holder: LockHolder): string {
  return `pid ${holder.pid} on host ${JSON.stringify(holder.host)}${holder.startTime ? ` (started at tick ${holder.startTime})` : ''}`;
}

/** The lock file as found: its text, inode and mtime; undefined when there is none. */
interface Seen {
  text: string;
  ino: number;
  mtimeMs: number;
}

async function look(path: string): Promise<Seen | undefined> {
  try {
    const [text, info] = await Promise.all([readFile(path, 'utf8'), stat(path)]);
    return { text, ino: info.ino, mtimeMs: info.mtimeMs };
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw e;
  }
}

/** Rule 1: link a new lock file holding `text` at `lockPath`; false when a lock is there (EEXIST). */
async function linkNew(lockPath: string, text: string): Promise<boolean> {
  const temp = `${lockPath}.${process.pid}.${randomBytes(6).toString('hex')}`;
  await writeFile(temp, text, { flag: 'wx' }).catch(async (e) => { await unlink(temp).catch(() => {}); throw e; });
  try {
    await link(temp, lockPath);
    return true;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    return false;
  } finally {
    await unlink(temp).catch(() => {});
  }
}

/**
 * Take the lock of the ledger whose real path (symlinks resolved) is `ledgerPath`, opened as
 * `openedAs`. Rejects with an Error naming the holder when another live process holds it, and with
 * the file system's error (its `code` kept) when the lock file cannot be written.
 */
export async function lockLedger(ledgerPath: string, openedAs: string, options: LockOptions): Promise<LedgerLock> {
  const lockPath = `${ledgerPath}.lock`;
  const shown = resolve(openedAs) === ledgerPath ? `"${ledgerPath}"` : `"${openedAs}" (the file "${ledgerPath}")`;
  const mine = `${JSON.stringify({ ...self(options.staleMs), nonce: randomBytes(8).toString('hex') })}`;
  for (const deadline = Date.now() + LOCK_WAIT_MS; Date.now() < deadline;) {
    if (await linkNew(lockPath, mine)) return new HeldLock(lockPath, mine, options);
    const seen = await look(lockPath);
    if (seen === undefined) continue; // released meanwhile: try again
    const holder = parseHolder(seen.text);
    if (holder === undefined) {
      throw new Error(`Ledger.open: ${shown} is locked by "${lockPath}", which does not name a holder; ` +
        'if no process has the ledger open, delete that lock file');
    }
    const alive = whyAlive(holder, Date.now() - seen.mtimeMs, options.staleMs);
    if (alive !== undefined) {
      throw new Error(`Ledger.open: ${shown} is already open for writing by ${describeHolder(holder)}, ${alive} ` +
        `(lock file "${lockPath}"); one writer per ledger file, so close it there first`);
    }
    if (!(await takeOver(lockPath, seen))) await new Promise((resolve) => setTimeout(resolve, LOCK_POLL_MS));
  }
  throw new Error(`Ledger.open: could not lock ${shown}: its lock file "${lockPath}" kept changing; try again`);
}

function same(a: Seen | undefined, b: Seen): boolean {
  return a !== undefined && a.text === b.text && a.ino === b.ino && a.mtimeMs === b.mtimeMs;
}

/**
 * Rule 4: remove the stale lock `stale`, unless it changed meanwhile (then it stays, or is put
 * back). False when another takeover is under way: the caller waits, then looks again.
 */
async function takeOver(lockPath: string, stale: Seen): Promise<boolean> {
  const mutex = `${lockPath}.takeover`;
  if (!(await linkNew(mutex, JSON.stringify({ pid: process.pid, host: hostname() })))) {
    const info = await stat(mutex).catch(() => undefined);
    if (info !== undefined && Date.now() - info.mtimeMs > TAKEOVER_STALE_MS) await unlink(mutex).catch(() => {});
    return false;
  }
  try {
    // Under the mutex no other taker moves it: only a fresh lock linked since, or a refresh, changes it.
    if (!same(await look(lockPath), stale)) return true;
    const moved = `${lockPath}.stale.${process.pid}.${randomBytes(6).toString('hex')}`;
    try {
      await rename(lockPath, moved);
    } catch {
      return true; // gone already: the next look sees what is there now
    }
    if (!same(await look(moved).catch(() => undefined), stale)) await link(moved, lockPath).catch(() => {}); // refreshed: put it back
    await unlink(moved).catch(() => {});
    return true;
  } finally {
    await unlink(mutex).catch(() => {});
  }
}

/** A lock this process holds, kept fresh until released (rules 2 and 5). */
class HeldLock implements LedgerLock {
  readonly path: string;
  readonly #mine: string;
  readonly #onLost: (error: Error) => void;
  readonly #timer: NodeJS.Timeout;
  /** The refresh under way, if any: `release` waits for it, so none links the lock again after. */
  #refreshing: Promise<void> | undefined;
  #stopped = false;

  constructor(path: string, mine: string, options: LockOptions) {
    this.path = path;
    this.#mine = mine;
    this.#onLost = options.onLost;
    // A refresh that fails is retried by the next one; it never becomes an unhandled rejection.
    this.#timer = setInterval(() => { this.#refreshing ??= this.#refresh().catch(() => {}).finally(() => { this.#refreshing = undefined; }); },
      Math.max(1, Math.floor(options.staleMs / 3)));
    // The lock never keeps a process alive: an open ledger that nothing else uses lets it exit.
    this.#timer.unref();
  }

  /** Rule 2: touch the lock if it is still ours, link it again if it is gone, give it up if another took it (rule 5). */
  async #refresh(): Promise<void> {
    const text = await readFile(this.path, 'utf8').catch((e: NodeJS.ErrnoException) => (e.code === 'ENOENT' ? undefined : this.#mine));
    if (this.#stopped) return;
    if (text === this.#mine) {
      const now = new Date();
      // ENOENT: a takeover's rename in flight (it puts a live lock back) or a removal by hand: the next refresh sees.
      await utimes(this.path, now, now).catch(() => {});
      return;
    }
    if (text === undefined) {
      await linkNew(this.path, this.#mine).catch(() => false);
      return;
    }
    this.#stop();
    const holder = parseHolder(text);
    this.#onLost(new Error(`its lock "${this.path}" was taken over by ${holder === undefined ? 'another process' : describeHolder(holder)} ` +
      '(this process did not refresh it within its stale time), so another writer may be writing the file'));
  }

  #stop(): void {
    this.#stopped = true;
    clearInterval(this.#timer);
  }

  async release(): Promise<void> {
    this.#stop();
    await this.#refreshing;
    const text = await readFile(this.path, 'utf8').catch(() => undefined);
    if (text === this.#mine) await unlink(this.path).catch(() => {});
  }
}

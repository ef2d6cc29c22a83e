/**
 * One writer per ledger file, across processes: an advisory lock file `<ledger>.lock` that names
 * its holder (pid, the process's start time, host), next to the real file (the caller resolves
 * symlinks first, so two paths to one file meet one lock). `Ledger.open` takes it before reading the file
 * and `close()` gives it back.
 *
 * Why not a lock library: the common ones judge a lock stale by its age (proper-lockfile: mtime
 * older than 10 s by default), so a host that was SIGKILLed keeps its ledger unopenable for that
 * long, and none of them can say who holds it. A pid alone is no proof either (pids are reused),
 * so the holder is identified by pid + start time from /proc, the pair the kernel never repeats.
 *
 * Rules:
 * 1. The lock file is created whole or not at all: its content is written to a private temp file
 *    that is then hard-linked to the lock path (`link` fails with EEXIST if any lock is there).
 * 2. A lock whose holder is provably gone (same host, and no process with that pid and start
 *    time) is stale and taken over: it is first renamed to a private name, and only if what was
 *    moved is still that stale lock is it deleted; otherwise it is put back.
 * 3. A holder on another host, or one whose liveness cannot be read, is treated as alive.
 *
 * Not guaranteed: the lock is advisory (a writer that does not use `Ledger` is not stopped), and on
 * systems without /proc a stale lock is only recognised when its pid no longer exists.
 */

import { randomBytes } from 'node:crypto';
import { link, readFile, rename, unlink, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { resolve } from 'node:path';
import { readStat } from '../base/proc.js';

/** Who holds a ledger. */
interface LockHolder {
  pid: number;
  /** Start time of the process in clock ticks since boot (/proc/<pid>/stat field 22); 0 when unknown. */
  startTime: number;
  host: string;
}

/** A held lock: `release()` removes it if it is still ours. */
export interface LedgerLock {
  readonly path: string;
  release(): Promise<void>;
}

/** Start time of `pid` from /proc, or undefined when there is no such process (or no /proc). */
function startTimeOf(pid: number): number | undefined {
  return readStat(pid)?.start;
}

function self(): LockHolder {
  return { pid: process.pid, startTime: startTimeOf(process.pid) ?? 0, host: hostname() };
}

/** True when the holder is certainly gone (rule 3: anything uncertain counts as alive). */
function isGone(holder: LockHolder): boolean {
  if (holder.host !== hostname()) return false;
  if (holder.pid === process.pid) return false;
  const start = startTimeOf(holder.pid);
  if (start !== undefined) return holder.startTime !== 0 && start !== holder.startTime;
  try {
    process.kill(holder.pid, 0);
    return false;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'ESRCH';
  }
}

function parseHolder(text: string): LockHolder | undefined {
  try {
    const v = JSON.parse(text) as Partial<LockHolder>;
    if (Number.isSafeInteger(v.pid) && typeof v.startTime === 'number' && typeof v.host === 'string') return v as LockHolder;
  } catch {
    // not a lock we wrote
  }
  return undefined;
}

/** How a holder is named in an error. */
function describeHolder(holder: LockHolder): string {
  return `pid ${holder.pid} on host ${JSON.stringify(holder.host)}${holder.startTime ? ` (started at tick ${holder.startTime})` : ''}`;
}

/**
 * Take the lock of the ledger whose real path (symlinks resolved) is `ledgerPath`, opened as
 * `openedAs`. Rejects with an Error naming the holder when another live process holds it, and with
 * the file system's error (its `code` kept) when the lock file cannot be written.
 */
export async function lockLedger(ledgerPath: string, openedAs = ledgerPath): Promise<LedgerLock> {
  const lockPath = `${ledgerPath}.lock`;
  const shown = resolve(openedAs) === ledgerPath ? `"${ledgerPath}"` : `"${openedAs}" (the file "${ledgerPath}")`;
  const mine = JSON.stringify(self());
  const temp = `${lockPath}.${process.pid}.${randomBytes(6).toString('hex')}`;
  await writeFile(temp, mine, { flag: 'wx' }).catch(async (e) => { await unlink(temp).catch(() => {}); throw e; });
  try {
    for (let attempt = 0; attempt < 3; attempt++) {
      try {
        await link(temp, lockPath); // rule 1
        return { path: lockPath, release: () => releaseIfMine(lockPath, mine) };
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      }
      const text = await readFile(lockPath, 'utf8').catch(() => undefined);
      if (text === undefined) continue; // released meanwhile: try again
      const holder = parseHolder(text);
      if (holder === undefined) {
        throw new Error(`Ledger.open: ${shown} is locked by "${lockPath}", which does not name a holder; ` +
          'if no process has the ledger open, delete that lock file');
      }
      if (!isGone(holder)) {
        throw new Error(`Ledger.open: ${shown} is already open for writing by ${describeHolder(holder)} ` +
          `(lock file "${lockPath}"); one writer per ledger file, so close it there first`);
      }
      await takeOver(lockPath, text);
    }
    throw new Error(`Ledger.open: could not lock ${shown}: its lock file "${lockPath}" kept changing; try again`);
  } finally {
    await unlink(temp).catch(() => {});
  }
}

/** Rule 2: remove a stale lock, unless someone replaced it meanwhile. */
async function takeOver(lockPath: string, staleText: string): Promise<void> {
  const moved = `${lockPath}.stale.${process.pid}.${randomBytes(6).toString('hex')}`;
  try {
    await rename(lockPath, moved);
  } catch {
    return; // gone already: the next attempt sees what is there now
  }
  const text = await readFile(moved, 'utf8').catch(() => undefined);
  if (text !== staleText) await link(moved, lockPath).catch(() => {}); // a fresh lock: put it back
  await unlink(moved).catch(() => {});
}

async function releaseIfMine(lockPath: string, mine: string): Promise<void> {
  const text = await readFile(lockPath, 'utf8').catch(() => undefined);
  if (text === mine) await unlink(lockPath).catch(() => {});
}

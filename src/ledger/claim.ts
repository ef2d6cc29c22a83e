/**
 * One writer per ledger file (ledger.ts, invariant 6): two `Ledger`s in one process on the same
 * file are refused (by device and inode), and across processes and hosts the lock file of lock.ts
 * names the holder, who keeps it fresh; a ledger whose lock was taken over writes no more. The
 * lock is taken on the real file (symlinks resolved), so a path through a symlink meets the same
 * lock.
 *
 * Not guaranteed: the lock is advisory, and two hard links to one file (two real paths) in two
 * processes are two locks.
 */

import { realpath, stat as statPath } from 'node:fs/promises';
import { openError } from './file.js';
import { lockLedger, type LedgerLock } from './lock.js';

/** `dev:ino` of every ledger file open in this process, so a second writer is refused. */
const openFiles = new Set<string>();

/** A ledger's hold on its file. */
export interface FileClaim {
  /** `dev:ino` of the file as opened. */
  readonly fileKey: string;
  /** Its real path: the lock, and the sealed segments, sit next to it. */
  readonly real: string;
  readonly lock: LedgerLock;
}

/**
 * Claims the file opened at `path` whose stat is `stat`: refused while this process has it open,
 * then its lock is taken (`onLost`: told if it is taken over later). Rejects naming the path, and
 * then holds nothing.
 */
export async function claimFile(path: string, stat: { dev: number; ino: number }, staleMs: number,
  onLost: (error: Error) => void): Promise<FileClaim> {
  const fileKey = `${stat.dev}:${stat.ino}`;
  if (openFiles.has(fileKey)) {
    throw new Error(`Ledger.open: "${path}" is already open in this process; share that Ledger (two writers would break seq order)`);
  }
  openFiles.add(fileKey);
  try {
    const real = await realFileOf(path, fileKey);
    let lock: LedgerLock;
    try {
      lock = await lockLedger(real, path, { staleMs, onLost });
    } catch (cause) {
      if ((cause as NodeJS.ErrnoException).code === undefined) throw cause;
      throw await openError(path, `cannot write the lock file of "${path}"`, cause);
    }
    return { fileKey, real, lock };
  } catch (error) {
    openFiles.delete(fileKey);
    throw error;
  }
}

/** The file being written is now another (a sealing renamed it): `newKey` is claimed instead of `oldKey`. */
export function moveClaim(oldKey: string, newKey: string): void {
  openFiles.delete(oldKey);
  openFiles.add(newKey);
}

/** This process no longer has the file `fileKey` open (its lock is released on its own). */
export function dropClaim(fileKey: string): void {
  openFiles.delete(fileKey);
}

/**
 * The real path of the file open as `fileKey` (`dev:ino`) under `path`: the lock is taken there, so
 * every symlink to one file meets one lock. Rejects if the path no longer names that file.
 */
async function realFileOf(path: string, fileKey: string): Promise<string> {
  const real = await realpath(path);
  const stat = await statPath(real);
  if (`${stat.dev}:${stat.ino}` !== fileKey) {
    throw new Error(`Ledger.open: "${path}" was replaced while it was being opened; open it again`);
  }
  return real;
}

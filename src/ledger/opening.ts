/**
 * `Ledger.open`'s work on the file before the ledger is made: open it for appending, claim it
 * (claim.ts), read it (load.ts) and cut a torn tail; the ledger then appends the entries that
 * close the turns a crash left open.
 *
 * What open changes in a file (ledger.ts, invariant 5): it cuts a torn tail (a cut-short last
 * line, or a hole of zeros and what follows it, whose bytes it first copies to
 * `<path>.cut-<byte>`) and it appends status entries. A complete entry is never rewritten; one is
 * removed only with its sealed segment, by `removeSegments` (retention: the caller's decision).
 */

import { open as openFile, type FileHandle } from 'node:fs/promises';
import { claimFile, dropClaim, type FileClaim } from './claim.js';
import { openError, saveCut } from './file.js';
import { loadLedger, type LoadedLedger } from './load.js';

/** What `Ledger.open` repaired (`ledger.repair`). */
export interface LedgerRepair {
  /**
   * What was cut off the end of the file: a line a crash cut short, or a hole of zeros a power
   * loss left and every line after it (`hole: true`; those bytes are kept in `savedTo`).
   * Undefined when nothing was.
   */
  readonly cut?: { readonly bytes: number; readonly lines: number; readonly hole: boolean; readonly savedTo?: string };
  /** How many turns a crash had left open, now closed (`interrupted`, or `cancelled` after a recorded stop). */
  readonly closedTurns: number;
}

/** The file at `path`, open, claimed and read, its torn tail cut. */
export interface OpenedFile {
  readonly handle: FileHandle;
  readonly claim: FileClaim;
  readonly loaded: LoadedLedger;
  readonly repair: LedgerRepair;
}

/**
 * Opens (or creates) the file at `path`, claims it (`staleMs`, `onLost`: its lock's), reads it and
 * cuts its torn tail. Rejects with an Error naming the path and the cause, and then holds nothing.
 */
export async function openLedgerFile(path: string, staleMs: number, onLost: (error: Error) => void): Promise<OpenedFile> {
  let handle: FileHandle;
  try {
    // 'a+': appends always land at the end, and the same handle can read the file back for repair.
    handle = await openFile(path, 'a+');
  } catch (cause) {
    throw await openError(path, `cannot open "${path}" for appending`, cause);
  }
  let claim: FileClaim | undefined;
  try {
    const stat = await handle.stat();
    if (!stat.isFile()) throw new Error(`Ledger.open: "${path}" is not a regular file`);
    claim = await claimFile(path, stat, staleMs, onLost);
    const loaded = await loadLedger(path, claim.real, handle, stat.size);
    const repair = await cutTornTail(path, claim.real, handle, stat.size, loaded);
    return { handle, claim, loaded, repair };
  } catch (error) {
    await abandonFile({ handle, claim });
    throw error;
  }
}

/**
 * Gives back what an open that failed holds: its claim, its lock and its handle; `sealed`: the
 * file being written once a repair sealed a segment (the claim moved to it), closed too.
 */
export async function abandonFile(opened: { readonly handle: FileHandle; readonly claim: FileClaim | undefined },
  sealed?: { readonly fileKey: string; readonly handle: FileHandle }): Promise<void> {
  if (opened.claim !== undefined) dropClaim(opened.claim.fileKey);
  if (sealed !== undefined) {
    dropClaim(sealed.fileKey);
    await sealed.handle.close().catch(() => {});
  }
  await opened.claim?.lock.release();
  await opened.handle.close().catch(() => {});
}

/** Cuts the torn tail `loaded` found (keeping a hole's bytes aside, with a warning); returns the repair. */
async function cutTornTail(path: string, real: string, handle: FileHandle, size: number, loaded: LoadedLedger): Promise<LedgerRepair> {
  const { cut, repairs } = loaded;
  let savedTo: string | undefined;
  if (cut !== undefined) {
    // A hole may hide lines that did land: they are kept aside, never deleted.
    if (cut.hole) savedTo = await saveCut(handle, cut.at, size, `${real}.cut-${cut.at}`);
    await handle.truncate(loaded.completeBytes);
    process.emitWarning(`Ledger.open: cut ${cut.bytes} bytes (${cut.lines} lines) off the end of "${path}": ` +
      (cut.hole ? `a hole of zeros a power loss left and the lines after it, kept in "${savedTo}"` : 'a line a crash cut short'),
    { code: 'FULLSTOP_LEDGER_CUT' });
  }
  const turns = new Set(repairs.map((e) => e.turnId)).size;
  return {
    closedTurns: turns,
    ...(cut === undefined ? {} : { cut: { bytes: cut.bytes, lines: cut.lines, hole: cut.hole, ...(savedTo === undefined ? {} : { savedTo }) } }),
  };
}

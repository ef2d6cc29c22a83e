/**
 * What `Ledger.open` learns from the files, streamed (scan.ts): the sealed segments, oldest first,
 * then the file being written. It keeps the session index, every turn id (a turn id is used once),
 * the turns still open and where the last line ends, never the entries: memory grows with the
 * index's runs (session-index.ts), the turn ids and the open turns, not with the bytes.
 */

import { open as openFile, type FileHandle } from 'node:fs/promises';
import { isTerminalStatus, type LedgerEntryInput } from './entry.js';
import { OpenTurns } from './open-turns.js';
import { scanFile, type ScanCut } from './scan.js';
import { listSegments, type LedgerSegment, type PlacedSegment } from './segments.js';
import { SessionIndex } from './session-index.js';
import { TurnIds } from './turn-ids.js';

/** The ledger as the files hold it. */
export interface LoadedLedger {
  /** The sealed segments, oldest first, placed in the index's offsets. */
  segments: PlacedSegment[];
  /** Where the file being written starts in the index's offsets. */
  activeBase: number;
  /** The last seq (0 for none). */
  seq: number;
  /** The seq of the first line of the file being written, or the next seq when it is empty. */
  activeFirstSeq: number;
  /** Bytes of the file being written that hold whole lines; a cut tail is past it. */
  completeBytes: number;
  /** What was cut off the end of the file being written. */
  cut: ScanCut | undefined;
  index: SessionIndex;
  /** Every turn id, and which have ended. */
  turnIds: TurnIds;
  /** The entries that close the turns left open (entry.ts `closingEntries`). */
  repairs: LedgerEntryInput[];
}

/** Reads every segment of the ledger at `real` and the file being written (`handle`, `size` bytes). */
export async function loadLedger(path: string, real: string, handle: FileHandle, size: number): Promise<LoadedLedger> {
  const index = new SessionIndex();
  const turnIds = new TurnIds();
  const open = new OpenTurns();
  const segments: PlacedSegment[] = [];
  let seq = 0;
  let base = 0;
  const onEntryAt = (offset: number) => (entry: Parameters<OpenTurns['add']>[0], start: number, end: number) => {
    index.add(entry.sessionId, offset + start, offset + end, entry.seq);
    turnIds.note(entry.turnId, entry.seq, entry.type === 'status' && isTerminalStatus(entry.status));
    open.add(entry);
  };
  let previous: PlacedSegment | undefined;
  for (const segment of await listSegments(real)) {
    if (previous !== undefined) checkNoGap(previous, segment.firstSeq, segment.path);
    const file = await openFile(segment.path, 'r');
    try {
      const bytes = (await file.stat()).size;
      let firstSeq: number | undefined;
      const onEntry = onEntryAt(base);
      const scanned = await scanFile(file, bytes, {
        where: 'Ledger.open', path: segment.path, previousSeq: seq, tail: false,
        onEntry: (entry, start, end) => { firstSeq ??= entry.seq; onEntry(entry, start, end); },
      });
      checkAsNamed(segment, firstSeq, scanned.lastSeq);
      previous = { ...segment, bytes, base };
      segments.push(previous);
      seq = scanned.lastSeq;
      base += bytes + 1;
    } finally {
      await file.close();
    }
  }
  let firstActive: number | undefined;
  const onActive = onEntryAt(base);
  const scanned = await scanFile(handle, size, {
    where: 'Ledger.open', path, previousSeq: seq, tail: true,
    onEntry: (entry, start, end) => { firstActive ??= entry.seq; onActive(entry, start, end); },
  });
  if (previous !== undefined && firstActive !== undefined) checkNoGap(previous, firstActive, path);
  index.trim();
  // Retention may have removed every segment: the file being written then starts past the last one's seq.
  const activeFirstSeq = firstActive ?? scanned.lastSeq + 1;
  return {
    segments, activeBase: base, seq: scanned.lastSeq, activeFirstSeq, completeBytes: scanned.completeBytes, cut: scanned.cut,
    index, turnIds, repairs: open.repairs(),
  };
}

/**
 * A sealed segment holds exactly the seqs its name says (it was synced whole, then renamed): one
 * that starts or ends elsewhere was cut or replaced by hand, and its turns would be misread (a turn
 * whose end it lost repaired as `interrupted`), so it is refused.
 */
function checkAsNamed(segment: LedgerSegment, firstSeq: number | undefined, lastSeq: number): void {
  const named = `its name says it holds seqs ${segment.firstSeq} to ${segment.lastSeq}`;
  const why = firstSeq === undefined ? `is empty, but ${named}`
    : firstSeq !== segment.firstSeq ? `starts at seq ${firstSeq}, but ${named}`
      : lastSeq !== segment.lastSeq ? `ends at seq ${lastSeq}, but ${named}` : undefined;
  if (why === undefined) return;
  throw new Error(`Ledger.open: "${segment.path}" ${why}; a sealed segment never changes, so restore it or move it by hand`);
}

/**
 * The seqs follow on from `previous` to the file at `path` (starting at `nextSeq`): segments are
 * removed oldest first, so a gap means a missing segment, whose turns would be misread (a turn that
 * ended there repaired as `interrupted`, its turn ids used again), so it is refused.
 */
function checkNoGap(previous: LedgerSegment, nextSeq: number, path: string): void {
  if (nextSeq <= previous.lastSeq + 1) return; // an overlap is refused by the scan, as a seq out of order
  throw new Error(`Ledger.open: seqs ${previous.lastSeq + 1} to ${nextSeq - 1} are missing between "${previous.path}" and "${path}" ` +
    '(a segment was removed or lost); restore it, or, if that history is gone for good, remove every segment before the gap too ' +
    '(retention removes the oldest first)');
}

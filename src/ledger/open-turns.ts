/**
 * The turns a reading of the ledger found unfinished, kept as `Ledger.open` streams the file so the
 * repair (entry.ts `closingEntries`) can close them afterwards: for each, only what its repair
 * reads (the ids, types, times, call ids, statuses and reasons), never its inputs, arguments,
 * outputs or texts; a turn is dropped as soon as its terminal status is read. So memory grows with
 * the turns open at the end of the file, not with its bytes.
 */

import { closingEntries, isTerminalStatus, type LedgerEntry, type LedgerEntryInput } from './entry.js';

/** The fields of an entry a repair reads. */
const KEPT = ['seq', 'at', 'sessionId', 'turnId', 'type', 'callId', 'status', 'reason'] as const;

export class OpenTurns {
  /** session and turn → the turn's entries so far (stripped), in file order; a Map keeps the order turns first appear in. */
  readonly #turns = new Map<string, LedgerEntry[]>();

  /** Take the next entry of the file. */
  add(entry: LedgerEntry): void {
    const key = `${entry.sessionId.length}:${entry.sessionId}${entry.turnId}`;
    if (entry.type === 'status' && isTerminalStatus(entry.status)) {
      this.#turns.delete(key);
      return;
    }
    const stripped: Record<string, unknown> = {};
    for (const field of KEPT) {
      const value = (entry as unknown as Record<string, unknown>)[field];
      if (value !== undefined) stripped[field] = value;
    }
    const entries = this.#turns.get(key);
    if (entries === undefined) this.#turns.set(key, [stripped as unknown as LedgerEntry]);
    else entries.push(stripped as unknown as LedgerEntry);
  }

  /** How many turns are open now. */
  get size(): number { return this.#turns.size; }

  /** The entries that close every open turn (entry.ts `closingEntries`), in the order the turns first appeared. */
  repairs(): LedgerEntryInput[] {
    return closingEntries([...this.#turns.values()].flat());
  }
}

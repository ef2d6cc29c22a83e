/**
 * The turns a reading of the ledger found unfinished, kept as `Ledger.open` streams the file so the
 * repair (entry.ts `closingEntries`) can close them afterwards. For each open turn only what its
 * repair reads is kept: its calls without an output (and when each began), whether the marker is
 * written, and its `cancelling` (time and reason); never its inputs, arguments, outputs or texts,
 * and a turn is dropped as soon as its terminal status is read. So memory grows with the turns
 * open at the end of the file, not with its bytes, and a line costs a look-up, not a copy.
 */

import { closingEntries, isTerminalStatus, type LedgerEntry, type LedgerEntryInput } from './entry.js';

interface OpenTurn {
  sessionId: string;
  turnId: string;
  /** The seq of the turn's first entry (the repair keeps the turns in the order they began). */
  seq: number;
  /** callId → when its tool_call was written, for the calls with no output yet. */
  calls: Map<string, number>;
  marked: boolean;
  cancelling?: { at: number; reason?: unknown };
}

export class OpenTurns {
  /**
   * turn id → what its repair needs; a Map keeps the order turns first appear in. Keyed by the turn
   * id alone, as the ledger's own end check is (a turn id is used once): a line of the turn written
   * under another session id still belongs to that one turn, closed once.
   */
  readonly #turns = new Map<string, OpenTurn>();

  /** Take the next entry of the file. */
  add(entry: LedgerEntry): void {
    const key = entry.turnId;
    let turn = this.#turns.get(key);
    if (entry.type === 'status' && isTerminalStatus(entry.status)) {
      if (turn !== undefined) this.#turns.delete(key);
      return;
    }
    if (turn === undefined) {
      turn = { sessionId: entry.sessionId, turnId: entry.turnId, seq: entry.seq, calls: new Map(), marked: false };
      this.#turns.set(key, turn);
    }
    if (entry.type === 'tool_call') turn.calls.set(entry.callId, Number(entry.at));
    else if (entry.type === 'tool_output' || entry.type === 'tool_aborted') turn.calls.delete(entry.callId);
    else if (entry.type === 'turn_aborted') turn.marked = true;
    else if (entry.type === 'status' && entry.status === 'cancelling') turn.cancelling = { at: entry.at, reason: entry.reason };
  }

  /** How many turns are open now. */
  get size(): number { return this.#turns.size; }

  /**
   * The entries that close every open turn (entry.ts `closingEntries`, given each turn's entries
   * as far as its repair reads them), in the order the turns first appeared.
   */
  repairs(): LedgerEntryInput[] {
    const entries: LedgerEntry[] = [];
    for (const { sessionId, turnId, seq, calls, marked, cancelling } of this.#turns.values()) {
      const base = { seq, sessionId, turnId };
      entries.push({ ...base, at: 0, type: 'turn_started' });
      for (const [callId, at] of calls) entries.push({ ...base, at, type: 'tool_call', callId, name: '', args: null });
      if (marked) entries.push({ ...base, at: 0, type: 'turn_aborted', text: '' });
      if (cancelling !== undefined) {
        entries.push({ ...base, at: cancelling.at, type: 'status', status: 'cancelling', ...(cancelling.reason === undefined ? {} : { reason: cancelling.reason as string }) });
      }
    }
    return closingEntries(entries);
  }
}

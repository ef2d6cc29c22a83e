/**
 * The turns this instance runs, one a session at most: what refuses a second Send (409) and tells
 * the Stop desk which turn runs here. The events of a session are not kept here: its stream reads
 * them from the ledger (fullstop/http's `eventStream`), so an open stream holds nothing of this.
 */

/** Sessions with a turn running here at once; past it a new Send is refused (503). */
export const MAX_SESSIONS = 1000;

/** The running turns by session; see the file comment. */
export class Sessions {
  readonly #turns = new Map<string, string>();

  /** Sessions with a turn running here now. */
  get size(): number { return this.#turns.size; }

  /** The turn this instance runs for the session now, if any. */
  turnOf(sessionId: string): string | undefined {
    return this.#turns.get(sessionId);
  }

  /** Whether there is room for one more session's turn. */
  get full(): boolean {
    return this.#turns.size >= MAX_SESSIONS;
  }

  /** This instance starts the session's turn `turnId` (the caller checked it has none). */
  begin(sessionId: string, turnId: string): void {
    this.#turns.set(sessionId, turnId);
  }

  /** The turn ended; nothing changes when it is not the session's current turn. */
  end(sessionId: string, turnId: string): void {
    if (this.#turns.get(sessionId) === turnId) this.#turns.delete(sessionId);
  }
}

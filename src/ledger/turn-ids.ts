/**
 * The turn ids a ledger knows: a turn id is used once (ledger.ts, invariant 7), and nothing of a
 * turn is appended after its end (invariant 11).
 *
 * Invariants:
 * 1. A turn id is known from its first line to the removal of the segments holding its lines:
 *    `forgetEnded(throughSeq)` forgets the turns that ended with every line at or before
 *    `throughSeq` (their segments removed), as the next `Ledger.open` would not know them either.
 *    A turn that has not ended is never forgotten: its next line must still find it.
 * 2. One number a turn: the seq of its last line, negated once its terminal status is written.
 *
 * Memory: one Map entry a known turn (its id string and a number, about 80 to 100 bytes for a
 * 36-character id), never more: retention frees the turns it removes.
 */
export class TurnIds {
  /** turn id → seq of its last line, negative once the turn has ended (invariant 2). */
  readonly #turns = new Map<string, number>();

  /** True while the ledger knows `turnId` (invariant 1). */
  has(turnId: string): boolean {
    return this.#turns.has(turnId);
  }

  /** True when the turn's terminal status is written. */
  ended(turnId: string): boolean {
    return (this.#turns.get(turnId) ?? 0) < 0;
  }

  /** The turn has a line at `seq`; `terminal`: its terminal status. A turn once ended stays ended. */
  note(turnId: string, seq: number, terminal: boolean): void {
    this.#turns.set(turnId, terminal || this.ended(turnId) ? -seq : seq);
  }

  /** Forget every ended turn whose lines all have `seq <= throughSeq` (invariant 1); returns how many. */
  forgetEnded(throughSeq: number): number {
    let forgotten = 0;
    for (const [turnId, last] of this.#turns) {
      if (last < 0 && -last <= throughSeq) {
        this.#turns.delete(turnId);
        forgotten += 1;
      }
    }
    return forgotten;
  }
}

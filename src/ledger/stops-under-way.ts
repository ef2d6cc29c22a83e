/**
 * The turns of one store whose stop is under way: `cancelling` appended, terminal status not yet.
 * Their lines are a stop's (the file ledger lets them skip other sessions' queue), and `close()`
 * waits for them, bounded, taking only their appends meanwhile (store promise 6).
 */

import { isTerminalStatus } from './entry.js';
import { waitAtMost } from '../base/within.js';

export class StopsUnderWay {
  readonly #turns = new Set<string>();
  /** Resolves `settled()`'s wait once the last stop ends; `undefined` while nothing waits. */
  #done: (() => void) | undefined;

  /** True while `turnId`'s stop is under way. */
  has(turnId: string): boolean {
    return this.#turns.has(turnId);
  }

  /** Take an appended entry's status (`undefined` for an entry that is not a status). */
  note(turnId: string, status: unknown): void {
    if (status === 'cancelling') this.#turns.add(turnId);
    else if (isTerminalStatus(status) && this.#turns.delete(turnId) && this.#turns.size === 0) this.#done?.();
  }

  /** Resolves once no stop is under way, or after `ms`. */
  async settled(ms: number): Promise<void> {
    if (this.#turns.size === 0) return;
    await waitAtMost(new Promise<void>((resolve) => { this.#done = resolve; }), ms);
    this.#done = undefined;
  }
}

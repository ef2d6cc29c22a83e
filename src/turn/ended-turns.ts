/**
 * The statuses of the turns a runner ended lately, so a stop naming one says how it ended
 * (`already_finished` with its `status`, as the fleet's record says it).
 *
 * Invariants:
 * 1. Bounded: at most `max` turns are kept, the newest; adding one past it forgets the oldest.
 * 2. O(1) per operation: a Map keeps insertion order, so its first key is the oldest.
 */
import type { TerminalStatus } from '../ledger/entry.js';
import type { StopRequest } from './stop-request.js';

export class EndedTurns {
  readonly #max: number;
  readonly #statuses = new Map<string, TerminalStatus>();

  constructor(max: number) {
    this.#max = max;
  }

  /** Remember that `turnId` ended (or is ending by itself) with `status`. */
  add(turnId: string, status: TerminalStatus): void {
    this.#statuses.delete(turnId);
    this.#statuses.set(turnId, status);
    // Invariant 1: the oldest goes.
    if (this.#statuses.size > this.#max) this.#statuses.delete(this.#statuses.keys().next().value!);
  }

  /** `requestStop`'s `already_finished`, with the turn's status when it is one of the turns kept. */
  finished(sessionId: string, turnId: string): StopRequest {
    const status = this.#statuses.get(turnId);
    return status === undefined ? { outcome: 'already_finished', sessionId, turnId } : { outcome: 'already_finished', sessionId, turnId, status };
  }

  /** How `turnId` ended; `undefined` when it is not one of the turns kept. */
  statusOf(turnId: string): TerminalStatus | undefined {
    return this.#statuses.get(turnId);
  }
}

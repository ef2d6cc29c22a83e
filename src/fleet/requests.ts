/**
 * The stops this node is waiting on: each waits for the `ended` message of the turn it addressed.
 *
 * The waiter is registered *before* the stop script is sent, because the owner's acknowledgement
 * travels on another connection (the subscriber) and may be read before the script's own reply.
 * Until the script has said which turn the stop reached (a stop by session alone learns it only
 * then), messages for the session are kept and matched once it has.
 */
import type { EndedMessage } from './messages.js';

export interface StopWait {
  /** The ended message of the addressed turn, or undefined when `ms` ran out (or the fleet closed). */
  readonly ended: Promise<EndedMessage | undefined>;
  /** The script has answered: the stop reached this turn at this epoch. */
  address(turnId: string, epoch: number, ms: number): void;
  cancel(): void;
}

interface Waiter {
  turnId?: string;
  epoch?: number;
  early: EndedMessage[];
  settle(msg: EndedMessage | undefined): void;
}

export class StopRequests {
  readonly #waiting = new Map<string, Set<Waiter>>();

  /** Start waiting for the end of a turn of `sessionId` (the turn is named later, by `address`). */
  wait(sessionId: string): StopWait {
    let settle!: (msg: EndedMessage | undefined) => void;
    const ended = new Promise<EndedMessage | undefined>((resolve) => { settle = resolve; });
    let timer: NodeJS.Timeout | undefined;
    const set = this.#waiting.get(sessionId) ?? this.#waiting.set(sessionId, new Set()).get(sessionId)!;
    const waiter: Waiter = {
      early: [],
      settle: (msg) => {
        clearTimeout(timer);
        set.delete(waiter);
        if (set.size === 0 && this.#waiting.get(sessionId) === set) this.#waiting.delete(sessionId);
        settle(msg);
      },
    };
    set.add(waiter);
    return {
      ended,
      address: (turnId, epoch, ms) => {
        waiter.turnId = turnId;
        waiter.epoch = epoch;
        const match = waiter.early.find((m) => m.turnId === turnId && m.epoch === epoch);
        waiter.early = [];
        if (match !== undefined) return waiter.settle(match);
        timer = setTimeout(() => waiter.settle(undefined), ms);
      },
      cancel: () => waiter.settle(undefined),
    };
  }

  /** An `ended` message arrived: settle the waiters of that turn. */
  onEnded(msg: EndedMessage): void {
    for (const waiter of [...(this.#waiting.get(msg.sessionId) ?? [])]) {
      if (waiter.turnId === undefined) waiter.early.push(msg);
      else if (waiter.turnId === msg.turnId && waiter.epoch === msg.epoch) waiter.settle(msg);
    }
  }

  /** Settle every wait at once (close): their stops answer `cancelling`. */
  cancelAll(): void {
    for (const set of [...this.#waiting.values()]) for (const waiter of [...set]) waiter.settle(undefined);
  }

  get size(): number {
    let n = 0;
    for (const set of this.#waiting.values()) n += set.size;
    return n;
  }
}

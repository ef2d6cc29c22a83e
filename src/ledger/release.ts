/**
 * When the Ledger's promises go on: the appends whose lines a write just took to the OS, and the
 * flushes a sync just made durable. One write or sync can answer hundreds of sessions at once, and
 * each goes on with its caller's next steps in the microtasks that follow; answered all together
 * they would hold the event loop (and everyone else's next step, a stop's among them) for the sum
 * of those continuations. So they are released `RELEASE_SLICE` a turn of the event loop, in order,
 * with the lines of a turn being stopped (`urgent`) ahead of the rest.
 */

/** How many waiters are released per turn of the event loop. */
export const RELEASE_SLICE = 32;

/** A written line's append promise, as the release queue sees it. */
export interface Releasable {
  readonly turnId: string;
  /** A line of a turn being stopped: released ahead of the others (after its own turn's earlier lines). */
  readonly urgent: boolean;
  released: boolean;
  resolve(): void;
}

/** A FIFO with a head index (no `shift`, which copies). */
class Fifo<T> {
  items: T[] = [];
  head = 0;
  get size(): number { return this.items.length - this.head; }
  push(item: T): void { this.items.push(item); }
  next(): T { return this.items[this.head++]!; }
  /** Drop what was taken once nothing is left. */
  compact(): void {
    if (this.head === this.items.length) {
      this.items = [];
      this.head = 0;
    }
  }
}

/** The written lines waiting to be released. */
export class ReleaseQueue {
  readonly #urgent = new Fifo<Releasable>();
  readonly #normal = new Fifo<Releasable>();
  /** True while a later slice is scheduled. */
  #scheduled = false;

  /** Lines just written, in seq order; released by the next `kick`. */
  push(lines: readonly Releasable[]): void {
    for (const line of lines) (line.urgent ? this.#urgent : this.#normal).push(line);
  }

  /**
   * Release a slice now: the first when none is scheduled, else the urgent lines only (a stop's
   * line does not wait for the next turn of the loop); what is left goes a slice per turn.
   */
  kick(): void {
    if (this.#scheduled) {
      this.#releaseUrgent(RELEASE_SLICE);
      this.#urgent.compact();
    } else {
      this.#slice();
    }
  }

  #slice = (): void => {
    this.#releaseNormal(RELEASE_SLICE - this.#releaseUrgent(RELEASE_SLICE));
    this.#urgent.compact();
    this.#normal.compact();
    this.#scheduled = this.#urgent.size + this.#normal.size > 0;
    if (this.#scheduled) setImmediate(this.#slice);
  };

  /** Release up to `max` urgent lines, each after its turn's earlier lines still waiting; returns how many. */
  #releaseUrgent(max: number): number {
    let count = 0;
    while (count < max && this.#urgent.size > 0) {
      const line = this.#urgent.next();
      if (line.released) continue;
      const normal = this.#normal.items;
      for (let i = this.#normal.head; i < normal.length; i++) {
        if (normal[i]!.turnId === line.turnId) release(normal[i]!);
      }
      release(line);
      count++;
    }
    return count;
  }

  /** Release up to `max` other lines, in order. */
  #releaseNormal(max: number): void {
    let count = 0;
    while (count < max && this.#normal.size > 0) {
      const line = this.#normal.next();
      if (line.released) continue;
      release(line);
      count++;
    }
  }
}

function release(line: Releasable): void {
  if (line.released) return;
  line.released = true;
  line.resolve();
}

/** Resolve a sync's flushes in order, `RELEASE_SLICE` now and as many after each later turn of the event loop. */
export function releaseSliced(waiters: readonly { resolve(): void }[]): void {
  let next = 0;
  const slice = () => {
    const end = Math.min(next + RELEASE_SLICE, waiters.length);
    for (; next < end; next++) waiters[next]!.resolve();
    if (next < waiters.length) setImmediate(slice);
  };
  slice();
}

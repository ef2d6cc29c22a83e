/**
 * A book of values kept for a fixed time, by (group, id): the one mechanism behind every "stop kept
 * for a turn that has not started" (the runner's `PendingStops`, the example server's `KeptStops`).
 * The policy (what is refused, and why) is the caller's; the book only keeps, expires and counts.
 *
 * Invariants:
 * 1. A value is removed only by its expiry or its `take`, never for another's sake: a caller
 *    bounds the book by refusing to `add` (it reads `size`, `groups` and `held` first).
 * 2. Every operation is O(1), amortised over expiries: entries live on a list in insertion order,
 *    which is expiry order (every entry lives the same `ttlMs`), so expired ones are unlinked from
 *    its front as the book is used, with no timer and no scan; a `take` unlinks its entry in place.
 * 3. Expiry is measured on the monotonic clock (`performance.now()`); `expiresAt` (epoch ms) is
 *    only reported. A group's map is removed with its last entry, so `groups` counts live groups.
 */

/** A kept value and when it is forgotten. */
export interface Expiring<V> {
  readonly value: V;
  /** When it is forgotten, in epoch ms (`Date.now()`). */
  readonly expiresAt: number;
}

interface Entry<V> extends Expiring<V> {
  readonly group: string;
  readonly id: string;
  /** performance.now() past which it is forgotten (invariant 3). */
  readonly deadline: number;
  prev: Entry<V> | undefined;
  next: Entry<V> | undefined;
}

/** See the file comment. */
export class ExpiringBook<V> {
  readonly #ttlMs: number;
  /** group → id → entry; a group's map is removed with its last entry. */
  readonly #groups = new Map<string, Map<string, Entry<V>>>();
  #size = 0;
  /** The oldest entry (next to expire) and the newest; both `undefined` when the book is empty. */
  #head: Entry<V> | undefined;
  #tail: Entry<V> | undefined;

  /** @param ttlMs how long each value is kept, in ms. */
  constructor(ttlMs: number) {
    this.#ttlMs = ttlMs;
  }

  /** Values kept now (expired ones are forgotten first). */
  get size(): number {
    this.#dropExpired(performance.now());
    return this.#size;
  }

  /** Groups holding at least one value now. */
  get groups(): number {
    this.#dropExpired(performance.now());
    return this.#groups.size;
  }

  /** Values the group holds now. */
  held(group: string): number {
    this.#dropExpired(performance.now());
    return this.#groups.get(group)?.size ?? 0;
  }

  /** The value kept for (group, id), left in place; `undefined` when there is none (or it expired). */
  get(group: string, id: string): Expiring<V> | undefined {
    this.#dropExpired(performance.now());
    const entry = this.#groups.get(group)?.get(id);
    return entry === undefined ? undefined : reportOf(entry);
  }

  /** Keeps `value` for (group, id) for `ttlMs`; one kept already stays (its value and expiry) and is returned. */
  add(group: string, id: string, value: V): Expiring<V> {
    const now = performance.now();
    this.#dropExpired(now);
    let ids = this.#groups.get(group);
    const first = ids?.get(id);
    if (first !== undefined) return reportOf(first);
    const entry: Entry<V> = { group, id, value, expiresAt: Date.now() + this.#ttlMs, deadline: now + this.#ttlMs, prev: this.#tail, next: undefined };
    if (this.#tail === undefined) this.#head = entry;
    else this.#tail.next = entry;
    this.#tail = entry;
    if (ids === undefined) this.#groups.set(group, (ids = new Map()));
    ids.set(id, entry);
    this.#size += 1;
    return reportOf(entry);
  }

  /** The value kept for (group, id), removed; `undefined` when there is none (or it expired). */
  take(group: string, id: string): Expiring<V> | undefined {
    this.#dropExpired(performance.now());
    const entry = this.#groups.get(group)?.get(id);
    if (entry === undefined) return undefined;
    this.#remove(entry);
    return reportOf(entry);
  }

  #dropExpired(now: number): void {
    while (this.#head !== undefined && this.#head.deadline <= now) this.#remove(this.#head);
  }

  /** Unlink `entry` from the list and its group's map (invariant 2: O(1)). */
  #remove(entry: Entry<V>): void {
    if (entry.prev === undefined) this.#head = entry.next;
    else entry.prev.next = entry.next;
    if (entry.next === undefined) this.#tail = entry.prev;
    else entry.next.prev = entry.prev;
    entry.prev = entry.next = undefined;
    const ids = this.#groups.get(entry.group)!;
    ids.delete(entry.id);
    if (ids.size === 0) this.#groups.delete(entry.group);
    this.#size -= 1;
  }
}

/** What a caller sees of an entry: never the entry itself (its links are the book's). */
function reportOf<V>({ value, expiresAt }: Entry<V>): Expiring<V> {
  return { value, expiresAt };
}

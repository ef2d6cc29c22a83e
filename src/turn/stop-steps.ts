/**
 * The steps of a runner stop that are more than one line (docs/design.md §2): the grace wait
 * (step 4), the hard stop with its counts (step 5), and the history (steps 2, 6 and 7), whose
 * every failure is kept for the report instead of ending the stop. The order itself lives in one
 * place, `TurnRunner.#stopSequence`.
 */

import { ownersOf, settlesByItself, type Owner } from '../token/owners.js';
import type { ActiveTurn } from './active-turn.js';
import { abortedToolText, turnAbortedMarker } from '../ledger/texts.js';
import { hasLiveBackground } from '../exec/background-live.js';
import type { LedgerStore } from '../ledger/store.js';
import { LedgerTimeoutError } from '../errors.js';
import { within } from '../base/within.js';

/** What the grace window saw. */
export interface Grace {
  /** The turn's owners when the grace began (nothing new can start once a stop began). */
  readonly owners: readonly Owner[];
  /** Every task, process tree and tool call settled, and the body too unless it waits on a question. */
  readonly inTime: boolean;
  /** The body had not settled when the grace ended, and was not waiting on a question. */
  readonly bodyAbandoned: boolean;
  /** A question was pending when the grace began: the body is given until the hard stop rejected it. */
  readonly waitsOnUser: boolean;
}

/**
 * Step 4: wait up to `graceMs` for the turn's owners and its body to settle; ends as soon as they
 * have (latched promises: a settlement before the wait began is not missed). A body waiting on a
 * question cannot settle before the hard stop rejects it, so then the body is not waited for.
 */
export async function waitForGrace(turn: ActiveTurn, graceMs: number): Promise<Grace> {
  const owners = ownersOf(turn.token);
  const waitsOnUser = owners.some((o) => o.kind === 'question');
  const awaited: Promise<unknown>[] = owners.filter((o) => settlesByItself(o.kind)).map((o) => o.settled);
  if (!waitsOnUser) awaited.push(turn.bodySettled);
  const inTime = await within(Promise.all(awaited).then(() => true), graceMs, () => false);
  return { owners, inTime, bodyAbandoned: !waitsOnUser && !turn.bodyOver, waitsOnUser };
}

/**
 * After the hard stop: whether the body is abandoned. A body that was waiting on a question gets
 * one turn of the event loop after the hard stop rejected the question to unwind; one that still
 * has not settled then ignored the stop as surely as one that never listened.
 */
export async function isBodyAbandoned(turn: ActiveTurn, grace: Grace): Promise<boolean> {
  if (!grace.waitsOnUser || turn.bodyOver) return grace.bodyAbandoned;
  await Promise.race([turn.bodySettled, new Promise((resolve) => setImmediate(resolve))]);
  return !turn.bodyOver;
}

/**
 * Step 5: hard-stop what is left (terminate workers, kill process groups, reject questions) and
 * count it, together with what an owner's own timer hard-stopped during the grace.
 */
export async function hardStopLeft(turn: ActiveTurn, grace: Grace): Promise<{ workers: number; processGroups: number; questions: number }> {
  const left = ownersOf(turn.token);
  const byOwnTimer = grace.owners.filter((o) => !left.includes(o) && o.hard === true);
  const counted = [...left, ...byOwnTimer];
  const count = (kind: Owner['kind']) => counted.filter((o) => o.kind === kind).length;
  const hardStopped = { workers: count('task'), processGroups: count('process'), questions: count('question') };
  await Promise.allSettled(left.map(async (o) => o.hardStop()));
  return hardStopped;
}

/**
 * The stop's writes. A failed write or flush never ends the stop: the first error is kept for the
 * report (`ledgerError`), and the ledger itself refuses everything after a failed write, so the
 * next `Ledger.open` closes the turn from whatever reached the disk.
 */
export class StopHistory {
  /** The first ledger failure of this stop; `undefined` while everything was written. */
  error: unknown = undefined;
  readonly #turn: ActiveTurn;
  readonly #ledger: LedgerStore | undefined;
  /** Step 7's flush, begun by step 6; `undefined` before. */
  #flushing: Promise<void> | undefined;

  constructor(turn: ActiveTurn, ledger: LedgerStore | undefined) {
    this.#turn = turn;
    this.#ledger = ledger;
  }

  /**
   * Step 2: the `cancelling` intent (with the stop's `detail`, when it has one), durable. The flush
   * is asked in the same synchronous run as the append, so it writes the line itself and syncs (see
   * `Ledger.flush`): one trip to the disk.
   */
  intent(reason: string, detail: string | undefined): Promise<void> | undefined {
    // Without a ledger nothing is written: the caller's await of undefined is one promise hop
    // to the signal instead of the write's several (and still one, so the stop is under way,
    // `ActiveTurn.stopping` set, before any abort listener can join it).
    if (this.#ledger === undefined) return undefined;
    const written = this.#turn.write(detail === undefined ? { type: 'status', status: 'cancelling', reason } : { type: 'status', status: 'cancelling', reason, detail });
    const kept = this.#keep([written, this.#ledger.flush(this.#turn.turnId)]);
    const bound = this.#ledger.intentTimeoutMs;
    return bound === undefined ? kept : this.#within(kept, bound);
  }

  /**
   * `kept`, or at `ms` a ledgerError saying the intent was not confirmed (the store's
   * `intentTimeoutMs`: a Stop never waits seconds on a sick database). The write goes on.
   */
  #within(kept: Promise<void>, ms: number): Promise<void> {
    return within(kept, ms, () => {
      this.error ??= new LedgerTimeoutError(`the stop's intent was not confirmed by the ledger within ${ms} ms (intentTimeoutMs); the stop went on`);
    });
  }

  /**
   * Step 6: an aborted output for each unfinished call (finished ones keep their real output, a cut
   * one its `partial`: see `ActiveTurn.partialOf`), the marker and `cancelled`, queued back to back,
   * each in the words of `reason` (texts.ts); from here on nothing else of the turn is written.
   */
  abortedTurn(reason: string): Promise<void> {
    const turn = this.#turn;
    const writes: Promise<void>[] = [];
    for (const [callId, call] of turn.calls) {
      if (call.finished) continue;
      const output = abortedToolText(performance.now() - call.recordedAt, reason);
      const partial = turn.partialOf(callId);
      writes.push(turn.write(partial === undefined ? { type: 'tool_aborted', callId, output } : { type: 'tool_aborted', callId, output, partial }));
    }
    // Background processes survive the stop: the marker mentions them only if one of the turn's is alive now.
    const backgroundRunning = hasLiveBackground(turn.sessionId, turn.turnId);
    writes.push(turn.write({ type: 'turn_aborted', text: turnAbortedMarker(reason, { backgroundRunning }), reason }));
    writes.push(turn.write({ type: 'status', status: 'cancelled', reason }));
    turn.closed = true;
    // Step 7 begins here, in the same synchronous run, so the flush writes these lines itself
    // (one write, then the sync) and step 6 ends once they are written.
    this.#flushing = this.#keep([this.#ledger?.flush(turn.turnId)]);
    return this.#keep(writes);
  }

  /** Step 7: fdatasync (begun by step 6). */
  flush(): Promise<void> {
    return this.#flushing ?? this.#keep([this.#ledger?.flush(this.#turn.turnId)]);
  }

  async #keep(writes: Array<Promise<unknown> | undefined>): Promise<void> {
    for (const result of await Promise.allSettled(writes)) {
      if (result.status === 'rejected') this.error ??= result.reason;
    }
  }
}

/**
 * `RecordingToken`: the task's own token, seen through a wrapper that notes the time of every
 * check. The probe worker binds it in place of the real one for the duration of one task, so the
 * user's `checkpoint()`, `checkCancelled()`, `isCancelled()`, `sleep()` and
 * `sleepUnlessCancelled()` land here; ordinary pool tasks never see it and pay nothing for it.
 *
 * A gap is the stretch between two checks: from the call of the user's function to its first
 * check, from one check to the next, and from the last check to the function's return. A
 * sleep or a paused `checkpoint()` ends a gap when it begins and starts the next one when it
 * returns: while blocked on the slot the task is as responsive as a task can be.
 */

import type { CancelledError } from '../src/errors.js';
import { binOf, C_STARTED, SITE_BYTES, sharedNow, T_CHECKS, T_END, T_LAST, T_MAX_GAP, T_START, type ProbeRecord } from './probe-record.js';
import { SlotToken } from './worker-token.js';

/** Frames in this directory are fullstop's own; the call site a user wants is the first frame outside it. */
const OWN_DIR = new URL('.', import.meta.url).href;

/** The task's token with every check timed into a `ProbeRecord` (see above). */
export class RecordingToken extends SlotToken {
  readonly #control: Int32Array;
  readonly #times: Float64Array;
  readonly #bins: Float64Array;
  readonly #site: Uint8Array;
  /** True inside `checkpoint()`, whose own inner check is not a second check of the user's. */
  #quiet = false;

  constructor(real: SlotToken, record: ProbeRecord) {
    super(real.cells, real.index, real.generation);
    this.root = real.root;
    this.#control = new Int32Array(record.control);
    this.#times = new Float64Array(record.times);
    this.#bins = new Float64Array(record.bins);
    this.#site = new Uint8Array(record.site);
  }

  /** The user's function is about to be called: the first gap starts now. */
  begin(): void {
    const now = sharedNow();
    this.#times[T_START] = now;
    this.#times[T_LAST] = now;
    this.#times[T_MAX_GAP] = 0;
    this.#times[T_CHECKS] = 0;
    Atomics.store(this.#control, C_STARTED, 1);
    Atomics.notify(this.#control, C_STARTED);
  }

  /**
   * The user's function has settled. `closesGap`: it returned (or failed on its own), so the
   * stretch since its last check was a real gap; a function that ended by throwing the
   * `CancelledError` of a check already closed its last gap at that check.
   */
  end(closesGap: boolean): void {
    if (closesGap) this.#close('(the end of the task)');
    this.#times[T_END] = sharedNow();
  }

  override isCancelled(): boolean {
    this.#check();
    return super.isCancelled();
  }

  // `checkCancelled()` of `fullstop/worker`, `SlotToken.checkCancelled` and `checkpoint` all come through here.
  override checkError(): CancelledError | undefined {
    if (!this.#quiet) this.#check();
    return super.checkError();
  }

  // `sleep()` of `fullstop/worker` and `SlotToken.sleep` both come through here.
  override sleepOrError(ms: number): CancelledError | undefined {
    this.#check();
    try {
      return super.sleepOrError(ms);
    } finally {
      this.#times[T_LAST] = sharedNow();
    }
  }

  override sleepUnlessCancelled(ms: number): boolean {
    this.#check();
    try {
      return super.sleepUnlessCancelled(ms);
    } finally {
      this.#times[T_LAST] = sharedNow();
    }
  }

  override checkpoint(): void {
    this.#check();
    this.#quiet = true;
    try {
      super.checkpoint();
    } finally {
      this.#quiet = false;
      this.#times[T_LAST] = sharedNow();
    }
  }

  /** A check by the user's code: it closes the gap that ends now. */
  #check(): void {
    this.#times[T_CHECKS]!++;
    this.#close(undefined);
  }

  /** Close the gap that ends now; a new longest one also records where it ended. */
  #close(site: string | undefined): void {
    const now = sharedNow();
    const gap = now - this.#times[T_LAST]!;
    this.#bins[binOf(gap)]!++;
    if (gap > this.#times[T_MAX_GAP]!) {
      this.#times[T_MAX_GAP] = gap;
      this.#writeSite(site ?? callSite());
      // Read again, so a new maximum's stack capture is not charged to the next gap.
      this.#times[T_LAST] = sharedNow();
      return;
    }
    this.#times[T_LAST] = now;
  }

  #writeSite(site: string | undefined): void {
    this.#site.fill(0);
    if (site !== undefined) new TextEncoder().encodeInto(site.slice(0, SITE_BYTES / 4), this.#site);
  }
}

/** `file:line:column` of the user's frame that called the check, if the stack shows one. */
function callSite(): string | undefined {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 12;
  const stack = new Error().stack ?? '';
  Error.stackTraceLimit = limit;
  for (const line of stack.split('\n').slice(1)) {
    const m = /\(?((?:file|node):[^()\s]+|\/[^()\s]+):(\d+):(\d+)\)?$/.exec(line.trim());
    if (m === null || m[1]!.startsWith(OWN_DIR) || m[1]!.startsWith('node:')) continue;
    const file = m[1]!.startsWith('file:') ? decodeURI(new URL(m[1]!).pathname) : m[1]!;
    return `${file}:${m[2]}:${m[3]}`;
  }
  return undefined;
}

/**
 * What the history tells the model about a stop (docs/design.md, "The history tells the model the
 * truth"): the marker that ends a stopped turn, the output of a tool call a stop cut short, and the
 * output a crash repair gives a call nobody stopped. The words follow the stop's reason: only a
 * `cancel.user` stop says the user stopped the turn; any other says what did, and that the user did
 * not ask for it, so a model may resume the work instead of treating it as refused.
 */

import { FleetReasons, StopReasons } from '../constants.js';
import { describe } from '../errors.js';

/** What stopped the turn, for the reasons fullstop gives itself (a phrase that completes "because …"). */
const CAUSES: Readonly<Record<string, string>> = Object.freeze({
  [StopReasons.shutdown]: 'the server shut down',
  [StopReasons.disconnect]: 'the client disconnected',
  [StopReasons.client]: 'the client cancelled its request',
  [StopReasons.timeout]: 'a deadline ran out',
  [FleetReasons.leaseLost]: 'the server running it lost its lease',
  [FleetReasons.leaseExpired]: 'the server running it stopped answering',
  [FleetReasons.closed]: 'the server left the fleet',
  [FleetReasons.restart]: 'the server restarted',
});

/** A reason's code is quoted at most this long in a text (a reason may be up to 1,024 characters). */
const QUOTED_REASON_CHARS = 200;

/**
 * What stopped a turn, as a phrase: `'the server shut down'` for `cancel.shutdown`, and so on for
 * each of `StopReasons` and `FleetReasons`; for any other code, `a stop with reason "<code>"`.
 * Never says the user stopped it: use it for a reason other than `cancel.user`.
 *
 * @example
 * stopCause('cancel.disconnect') // 'the client disconnected'
 * stopCause('deploy')            // 'a stop with reason "deploy"'
 */
export function stopCause(reason: string): string {
  const known = Object.hasOwn(CAUSES, reason) ? CAUSES[reason] : undefined;
  if (known !== undefined) return known;
  const code = reason.length > QUOTED_REASON_CHARS ? `${reason.slice(0, QUOTED_REASON_CHARS)}…` : reason;
  return `a stop with reason ${JSON.stringify(code)}`;
}

/** True when the text of `reason` is the user's own stop (the default reason, or none). */
function isUsersStop(reason: string | undefined): boolean {
  return reason === undefined || reason === StopReasons.user;
}

/** Said only when a background process the turn started was alive at its stop (`MarkerOptions`). */
const BACKGROUND = 'Background processes started during the turn may still be running.';
const PARTLY_EXECUTED = 'Tools that were aborted may have partly executed, so check their effects before relying on them.';

/** What a marker says the turn may have left behind, besides its aborted tools. */
export interface MarkerOptions {
  /**
   * A background process (`spawnBackground`) the turn started — with its token, or inside it —
   * was alive at the stop: the marker says background processes may still be running.
   * @default false — the marker says nothing of background processes
   */
  backgroundRunning?: boolean;
}

/**
 * The `turn_aborted` marker of a `cancel.user` stop of a turn with no background process alive:
 * tells the model the stop was deliberate and that aborted tools may have partly executed.
 * `turnAbortedMarker(reason, options)` gives the marker of any reason, and the one that says
 * background processes may still be running.
 */
export const TURN_ABORTED_MARKER = `The user stopped this turn on purpose. ${PARTLY_EXECUTED}`;

/**
 * The `turn_aborted` marker for a stop with `reason`: for `cancel.user` (the default), that the user
 * stopped the turn on purpose; for any other reason, what stopped the turn (`stopCause`) and that
 * the user did not ask for it, so the work may be resumed. Then, with `backgroundRunning`, that
 * background processes started during the turn may still be running; then that aborted tools may
 * have partly executed. `turnAbortedMarker()` is `TURN_ABORTED_MARKER`.
 *
 * @example
 * turnAbortedMarker('cancel.shutdown')
 * // 'This turn was stopped because the server shut down; the user did not ask for the stop, so the
 * //  work may be resumed. Tools that were aborted may have partly executed, …'
 * turnAbortedMarker(undefined, { backgroundRunning: true })
 * // 'The user stopped this turn on purpose. Background processes started during the turn may still
 * //  be running. Tools that were aborted may have partly executed, …'
 */
export function turnAbortedMarker(reason?: string, options?: MarkerOptions): string {
  checkReason('turnAbortedMarker', reason);
  const background = backgroundRunningOf(options);
  const cause = isUsersStop(reason)
    ? 'The user stopped this turn on purpose.'
    : `This turn was stopped because ${stopCause(reason!)}; the user did not ask for the stop, so the work may be resumed.`;
  return background ? `${cause} ${BACKGROUND} ${PARTLY_EXECUTED}` : `${cause} ${PARTLY_EXECUTED}`;
}

function backgroundRunningOf(options: unknown): boolean {
  if (options === undefined) return false;
  if (options === null || typeof options !== 'object') throw new TypeError(`turnAbortedMarker: options: expected an object, got ${describe(options)}`);
  const { backgroundRunning = false } = options as MarkerOptions;
  if (typeof backgroundRunning !== 'boolean') {
    throw new TypeError(`turnAbortedMarker: options.backgroundRunning: expected a boolean, got ${describe(backgroundRunning)}`);
  }
  return backgroundRunning;
}

/**
 * The output recorded for a tool call a stop cut short, with `s = max(elapsedMs / 1000, 0.1)` so
 * even an instant stop reads as a stop, not as a zero-time call: `aborted by user after {s:.1}s`
 * for `cancel.user` (the default), `aborted after {s:.1}s: {stopCause(reason)}` for any other reason.
 *
 * @example
 * abortedToolText(0)                        // 'aborted by user after 0.1s'
 * abortedToolText(2345)                     // 'aborted by user after 2.3s'
 * abortedToolText(2345, 'cancel.shutdown')  // 'aborted after 2.3s: the server shut down'
 */
export function abortedToolText(elapsedMs: number, reason?: string): string {
  if (typeof elapsedMs !== 'number') {
    throw new TypeError(`abortedToolText: expected a number of milliseconds, got ${describe(elapsedMs)}`);
  }
  if (!Number.isFinite(elapsedMs)) {
    throw new RangeError(`abortedToolText: expected a finite number of milliseconds, got ${describe(elapsedMs)}`);
  }
  checkReason('abortedToolText', reason);
  const seconds = Math.max(elapsedMs / 1000, 0.1).toFixed(1);
  return isUsersStop(reason) ? `aborted by user after ${seconds}s` : `aborted after ${seconds}s: ${stopCause(reason!)}`;
}

/** What a repair writes for a call a crash cut short, when no stop was recorded. */
export const INTERRUPTED_TOOL_TEXT =
  'interrupted: the host stopped before this tool call finished; it may have partly executed';

function checkReason(where: string, reason: unknown): void {
  if (reason !== undefined && typeof reason !== 'string') {
    throw new TypeError(`${where}: reason: expected a string, got ${describe(reason)}`);
  }
}

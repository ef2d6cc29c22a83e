/**
 * `turnOptions`: what a turn run for a request passes to `run` so that the request's abort (the
 * client went away) stops the turn with `cancel.disconnect` — or, with `onDisconnect: 'detach'`,
 * leaves it running. The framework's own abort reason ("Client connection prematurely closed.")
 * is kept as the stop's detail, never taken for its reason (`run`'s `signalReason`).
 */

import { StopReasons } from '../constants.js';
import { describe } from '../errors.js';
import { checkRequest } from './responses.js';

/** What `turnOptions` takes. */
export interface TurnOptionsOptions {
  /**
   * `'stop'`: the request's abort stops the turn (reason `cancel.disconnect`); `'detach'`: the
   * turn runs on without the request (stop it with `stopResponse`).
   * @default 'stop'
   */
  onDisconnect?: 'stop' | 'detach';
}

/** What `turnOptions` returns: spread it into `run`'s options. */
export interface RequestTurnOptions {
  /** The request's signal (absent when detached). */
  signal?: AbortSignal;
  /** The reason the turn's stop records when `signal` aborts. */
  signalReason?: string;
}

/**
 * `run` options tying a turn to `request`. Use it where the response lives as long as the turn
 * (a streamed answer): some runtimes abort `request.signal` once the response is sent (Deno does),
 * so a turn answered at once (a `202`) and run on should be `'detach'`ed.
 *
 * @example
 * const outcome = await runner.run(sessionId, body, { turnId, ...turnOptions(c.req.raw) });
 */
export function turnOptions(request: Request, options: TurnOptionsOptions = {}): RequestTurnOptions {
  checkRequest('turnOptions', request);
  const { onDisconnect = 'stop' } = options ?? {};
  if (onDisconnect === 'detach') return {};
  if (onDisconnect !== 'stop') throw new TypeError(`turnOptions: options.onDisconnect: expected 'stop' or 'detach', got ${describe(onDisconnect)}`);
  return { signal: request.signal, signalReason: StopReasons.disconnect };
}

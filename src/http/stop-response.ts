/**
 * `stopResponse`: a Stop over HTTP. The answer of `runner.requestStop` or `fleet.stop` — the one
 * vocabulary (DESIGN §11.3) — as JSON with the status its outcome calls for (`STOP_STATUS`).
 */

import { checkId, describe } from '../errors.js';
import type { StopAnswer } from '../fleet/answers.js';
import { TurnRunner } from '../turn/runner.js';
import { settledStop } from '../turn/stop-request.js';
import { BodyRefusal } from './errors.js';
import { readJsonBody } from './request-body.js';
import { checkBytes, checkRequest, jsonResponse } from './responses.js';

/** The default bound of a Stop's body, in bytes. */
export const DEFAULT_MAX_STOP_BODY_BYTES = 16 * 1024;

/**
 * The HTTP status of each outcome. `stopped` (a running turn's stop, awaited), `already_finished`,
 * `not_found` and `interrupted` are definite: 200. `pending` (kept for a turn that has not started)
 * and `cancelling` (recorded; the owner has not confirmed yet) are accepted: 202. `refused` (the
 * stop could not be kept: the turn is NOT stopped) is 429; `relay_unavailable` (Redis away) is 503.
 */
export const STOP_STATUS = Object.freeze({
  stopped: 200, already_finished: 200, not_found: 200, interrupted: 200,
  pending: 202, cancelling: 202,
  refused: 429, relay_unavailable: 503,
} as const);

/** Anything that stops as `fleet.stop` does: a `Fleet`, or a stop-only `FleetClient` (`Fleet.connect`). */
export interface FleetStopper {
  stop(sessionId: string, options?: { reason?: string; turnId?: string }): Promise<StopAnswer>;
}

/** What `stopResponse` takes besides the runner (or fleet) and the request. */
export interface StopResponseOptions {
  /** The session whose turn to stop. */
  sessionId: string;
  /** Only this turn (also from the body's `turnId`; the two must agree when both are given). */
  turnId?: string;
  /** The largest body read, in bytes (a larger one is a 413). @default 16384 */
  maxBodyBytes?: number;
  /**
   * With a fleet: this instance's runner. When the fleet answers `relay_unavailable` (Redis away)
   * and the turn runs here, it is stopped here all the same (a local stop needs no relay): the
   * answer is then `stopped` with `relay`, the text of why Redis was skipped.
   */
  runner?: TurnRunner;
}

/**
 * Stops the session's turn (or `turnId`) for an HTTP request whose JSON body is `{ reason?, turnId? }`
 * (empty is `{}`; `reason` defaults to `cancel.user`), and answers with the outcome as JSON:
 * `{ outcome: 'stopped', sessionId, turnId, report }` once a running turn is stopped, else the
 * runner's or fleet's answer as it is; the status is `STOP_STATUS[outcome]`. A body that is not
 * JSON, or a bad `reason`/`turnId`, is a 400 `{ error }`; one over `maxBodyBytes`, 413.
 * Throws a TypeError or RangeError naming the argument for a bad one.
 *
 * @example
 * app.post('/sessions/:id/stop', (c) => stopResponse(fleet ?? runner, c.req.raw, { sessionId: c.req.param('id') }));
 */
export async function stopResponse(runnerOrFleet: TurnRunner | FleetStopper, request: Request, options: StopResponseOptions): Promise<Response> {
  if (!(runnerOrFleet instanceof TurnRunner) && typeof (runnerOrFleet as FleetStopper | null)?.stop !== 'function') {
    throw new TypeError(`stopResponse: runnerOrFleet: expected a TurnRunner or a Fleet, got ${describe(runnerOrFleet)}`);
  }
  checkRequest('stopResponse', request);
  if (options === null || typeof options !== 'object') throw new TypeError(`stopResponse: options: expected { sessionId, ... }, got ${describe(options)}`);
  checkId('stopResponse: options.sessionId', options.sessionId);
  if (options.runner !== undefined && !(options.runner instanceof TurnRunner)) {
    throw new TypeError(`stopResponse: options.runner: expected a TurnRunner, got ${describe(options.runner)}`);
  }
  if (options.turnId !== undefined) checkId('stopResponse: options.turnId', options.turnId);
  const maxBytes = checkBytes('stopResponse: options.maxBodyBytes', options.maxBodyBytes, DEFAULT_MAX_STOP_BODY_BYTES);
  let asked: { reason?: string; turnId?: string };
  try {
    asked = stopFields(await readJsonBody(request, maxBytes), options.turnId);
  } catch (error) {
    if (error instanceof BodyRefusal) return jsonResponse(error.status, { error: error.message });
    throw error;
  }
  const { sessionId } = options;
  if (runnerOrFleet instanceof TurnRunner) {
    let answer;
    try {
      answer = runnerOrFleet.requestStop(sessionId, asked);
    } catch (error) {
      if (error instanceof TypeError || error instanceof RangeError) return jsonResponse(400, { error: error.message });
      throw error;
    }
    const settled = await settledStop(answer);
    return jsonResponse(STOP_STATUS[settled.outcome], settled);
  }
  let answer: StopAnswer;
  try {
    answer = await runnerOrFleet.stop(sessionId, asked);
  } catch (error) {
    if (error instanceof TypeError || error instanceof RangeError) return jsonResponse(400, { error: error.message });
    throw error;
  }
  if (answer.outcome === 'relay_unavailable' && options.runner !== undefined) {
    const local = await stoppedHere(options.runner, sessionId, asked);
    if (local !== undefined) return jsonResponse(200, { ...local, relay: answer.error.message });
  }
  return jsonResponse(STOP_STATUS[answer.outcome], answer, answer.outcome === 'relay_unavailable' ? { 'retry-after': '1' } : {});
}

/**
 * The turn stopped by `runner` when it runs it now; `undefined` (nothing done) otherwise. With
 * `turnId`, a turn that has not started is NOT kept here: that is the fleet's to keep, once Redis is back.
 */
async function stoppedHere(runner: TurnRunner, sessionId: string, asked: { reason?: string; turnId?: string }): Promise<object | undefined> {
  // With `turnId`, only when that turn is the session's running one (requestStop would keep it otherwise).
  if (asked.turnId !== undefined && runner.registry.currentToken(sessionId)?.turnId !== asked.turnId) return undefined;
  let answer;
  try {
    answer = runner.requestStop(sessionId, asked);
  } catch {
    return undefined; // a reason the fleet took and the runner does not: the fleet's answer stands
  }
  return answer.outcome === 'stopping' ? settledStop(answer) : undefined;
}

/** `{ reason?, turnId? }` of the body, or a 400 naming the field. */
function stopFields(body: unknown, routeTurnId: string | undefined): { reason?: string; turnId?: string } {
  if (body === undefined) return routeTurnId === undefined ? {} : { turnId: routeTurnId };
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw new BodyRefusal(400, `request body: expected a JSON object { reason?, turnId? }, got ${describe(body)}`);
  }
  const { reason, turnId } = body as { reason?: unknown; turnId?: unknown };
  if (reason !== undefined && typeof reason !== 'string') throw new BodyRefusal(400, `reason: expected a string, got ${describe(reason)}`);
  if (turnId !== undefined && typeof turnId !== 'string') throw new BodyRefusal(400, `turnId: expected a string, got ${describe(turnId)}`);
  if (turnId !== undefined && routeTurnId !== undefined && turnId !== routeTurnId) {
    throw new BodyRefusal(400, `turnId: the body's (${describe(turnId)}) is not the route's (${describe(routeTurnId)})`);
  }
  const id = routeTurnId ?? turnId;
  return { ...(reason === undefined ? {} : { reason }), ...(id === undefined ? {} : { turnId: id }) };
}

/**
 * The Stop route's stopper, for `stopResponse` (fullstop/http), which reads the body, answers with
 * the outcome's status and, with a fleet, stops a turn running here while Redis is away. What is the
 * server's own: a stop for a turn that has not started is admitted by its book (kept-stops.ts: a
 * session's first always has room, which the runner's and the fleet's bounds do not promise), and
 * alone it is kept there; with a fleet it is kept in Redis.
 */
import { StopReasons, type TurnRunner } from '../../src/index.js';
import type { Fleet } from '../../src/fleet/index.js';
import type { FleetStopper } from '../../src/http/index.js';
import { KeptStops, MAX_KEPT_STOPS_PER_SESSION, type KeepRefusal, type KeptStop } from './kept-stops.js';

/** What the desk needs of the server. */
export interface StopDeskOptions {
  runner: TurnRunner;
  fleet?: Fleet;
  /** The turn this instance runs for the session now, if any. */
  localTurn(sessionId: string): string | undefined;
  /** Whether the turn id is used already: in the history, or by a turn running here (of any session). */
  turnUsed(turnId: string): 'ledger' | 'running' | undefined;
}

type Asked = { reason?: string; turnId?: string };
type Answer = Awaited<ReturnType<FleetStopper['stop']>>;

/** Takes the Stops of every client; see the file comment. */
export class StopDesk implements FleetStopper {
  readonly #o: StopDeskOptions;
  readonly #kept: KeptStops;

  constructor(options: StopDeskOptions) {
    this.#o = options;
    this.#kept = new KeptStops(options.runner.pendingStopMs);
    options.runner.on('turn_started', ({ sessionId, turnId }) => this.started(sessionId, turnId));
  }

  /**
   * The session's turn `turnId` starts here: the stop kept for it, taken from the book. Alone, the
   * caller starts the turn cancelled with it; with a fleet, `run` finds the stop in Redis.
   */
  started(sessionId: string, turnId: string): KeptStop | undefined {
    const kept = this.#kept.take(sessionId, turnId);
    return this.#o.fleet === undefined ? kept : undefined;
  }

  /** Stops the session's turn (or `turnId`), as `fleet.stop` answers. */
  async stop(sessionId: string, asked: Asked = {}): Promise<Answer> {
    const { turnId } = asked;
    if (turnId === undefined || await this.#runs(sessionId, turnId)) return this.#answer(sessionId, asked);
    checkAsked(turnId, asked.reason);
    const { fleet, runner } = this.#o;
    if (fleet === undefined) {
      const used = this.#o.turnUsed(turnId);
      if (used === 'ledger') return this.#answer(sessionId, asked);
      if (used === 'running') return { outcome: 'not_found', sessionId }; // another session's turn
    }
    const why = this.#kept.refusal(sessionId, turnId);
    if (why !== undefined) return refused(sessionId, turnId, why);
    const reason = asked.reason ?? StopReasons.user;
    if (fleet === undefined) {
      const { expiresAt } = this.#kept.add(sessionId, turnId, reason);
      return { outcome: 'pending', sessionId, turnId, reason, graceMs: runner.graceMs, expiresAt } as Answer;
    }
    const answer = await fleet.stop(sessionId, { reason, turnId });
    if (answer.outcome === 'pending') this.#kept.add(sessionId, turnId, reason);
    return answer;
  }

  /** The fleet's answer, or the runner's with a stop under way awaited (`stopped`). */
  async #answer(sessionId: string, asked: Asked): Promise<Answer> {
    const { fleet, runner } = this.#o;
    if (fleet !== undefined) return fleet.stop(sessionId, asked);
    const answer = runner.requestStop(sessionId, asked);
    if (answer.outcome !== 'stopping') return answer as Answer;
    return { outcome: 'stopped', sessionId, turnId: answer.turnId, report: await answer.report } as Answer;
  }

  /** True when the session's turn `turnId` runs now (here or, with a fleet, anywhere). */
  async #runs(sessionId: string, turnId: string): Promise<boolean> {
    if (this.#o.localTurn(sessionId) === turnId) return true;
    try {
      const live = await this.#o.fleet?.turn(sessionId);
      return live != null && live.turnId === turnId && (live.status === 'running' || live.status === 'cancelling');
    } catch {
      return false;
    }
  }
}

/** A stop to keep names a usable turn id and a short reason (a RangeError is stopResponse's 400). */
function checkAsked(turnId: string, reason: string | undefined): void {
  if (!/^[\w.:-]{1,100}$/.test(turnId)) throw new RangeError(`turnId: expected 1-100 letters, digits, '-', '_', '.' or ':', got ${JSON.stringify(turnId.slice(0, 120))}`);
  if (reason !== undefined && (reason.trim() === '' || reason.length > 100)) throw new RangeError('reason: expected a non-empty string of at most 100 characters');
}

/** The answer to a stop the book cannot keep (429): the turn is not stopped. */
function refused(sessionId: string, turnId: string, why: KeepRefusal): Answer {
  const error = why === 'session_full'
    ? `stop: not kept (session_full): the session has ${MAX_KEPT_STOPS_PER_SESSION} stops waiting for turns that have not started; the turn is not stopped`
    : `stop: not kept (${why}): the turn has not started and no more stops can wait for turns now; the turn is not stopped`;
  return { outcome: 'refused', sessionId, turnId, why, error } as unknown as Answer;
}

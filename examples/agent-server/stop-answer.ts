/**
 * What a Stop does and answers. With a fleet: the fleet's `StopAnswer` (the stop reaches the
 * instance running the turn). Alone: `runner.requestStop`, answered in the same shapes, so a client
 * reads one kind of answer either way; a stop for a turn that has not started is kept in the
 * server's own book (kept-stops.ts: a session's first one always has room, whoever else sends
 * stops). A stop that could not be kept is said (`refused` / `pending_full`, as 429), never
 * answered as if it were in force.
 */
import { StopReasons, type StopReport, type TurnRunner } from '../../src/index.js';
import type { Fleet } from '../../src/fleet/index.js';
import { KeptStops, MAX_KEPT_STOPS_PER_SESSION, type KeepRefusal, type KeptStop } from './kept-stops.js';
import { errorText } from './runner-events.js';

/** A stop's answer when there is no fleet. */
export type LocalStopAnswer =
  | { outcome: 'stopped'; sessionId: string; turnId: string; node: string; report: StopReport }
  | { outcome: 'pending'; sessionId: string; turnId: string; expiresAt: number }
  | { outcome: 'already_finished'; sessionId: string; turnId: string }
  | { outcome: 'refused'; sessionId: string; turnId: string; why: string; error: string }
  | { outcome: 'not_found'; sessionId: string };

/** The HTTP answer to a Stop. */
export interface StopReply {
  status: number;
  body: Record<string, unknown>;
}

/** What the desk needs of the server. */
export interface StopDeskOptions {
  runner: TurnRunner;
  fleet?: Fleet;
  nodeId: string;
  /** The turn this instance runs for the session now, if any. */
  localTurn(sessionId: string): string | undefined;
  /** Whether the turn id is used already: in the history, or by a turn running here (of any session). */
  turnUsed(turnId: string): 'ledger' | 'running' | undefined;
}

/** Takes the Stops of every client; see the file comment. */
export class StopDesk {
  readonly #o: StopDeskOptions;
  readonly #kept: KeptStops;

  constructor(options: StopDeskOptions) {
    this.#o = options;
    this.#kept = new KeptStops(options.runner.pendingStopMs);
    options.runner.on('turn_started', ({ sessionId, turnId }) => this.started(sessionId, turnId));
  }

  /**
   * The session's turn `turnId` starts here (its Send landed here): the stop kept for it, taken
   * from the book. Without a fleet the caller starts the turn cancelled with it; with one the
   * fleet's `run` finds the stop in Redis, and this only frees its place here.
   */
  started(sessionId: string, turnId: string): KeptStop | undefined {
    const kept = this.#kept.take(sessionId, turnId);
    return this.#o.fleet === undefined ? kept : undefined;
  }

  /** Stops the session's turn (or `turnId`). */
  async stop(sessionId: string, options: { reason?: string; turnId?: string }): Promise<StopReply> {
    if (this.#o.fleet === undefined) return this.#local(sessionId, options);
    const { turnId } = options;
    if (turnId !== undefined && !(await this.#runs(sessionId, turnId))) {
      // A stop for a turn that has not started would be kept (in Redis): this book admits it first.
      const why = this.#kept.refusal(sessionId, turnId);
      if (why !== undefined) return { status: 429, body: refused(sessionId, turnId, why) };
    }
    const reply = await this.#fleet(this.#o.fleet, sessionId, options);
    if (reply.body.outcome === 'pending' && turnId !== undefined) this.#kept.add(sessionId, turnId, options.reason ?? StopReasons.user);
    return reply;
  }

  /** Any instance can stop any turn of the fleet: the answer says where it ran and how it ended. */
  async #fleet(fleet: Fleet, sessionId: string, options: { reason?: string; turnId?: string }): Promise<StopReply> {
    const answer = await fleet.stop(sessionId, options);
    if (answer.outcome === 'pending_full') {
      return { status: 429, body: { ...answer, error: 'stop: not kept (pending_full): the session has as many stops waiting for turns as it may; the turn is not stopped' } };
    }
    if (answer.outcome !== 'relay_unavailable') return { status: 200, body: answer };
    // Redis is away, but a turn running here can still be stopped here: the local stop needs no
    // relay (and its owner would stop it anyway once its lease could not be renewed).
    const report = this.#o.localTurn(sessionId) === undefined ? null : await this.#o.runner.stop(sessionId, options);
    if (report === null) return { status: 503, body: { ...answer, error: errorText(answer.error) } };
    return { status: 200, body: { outcome: 'stopped', sessionId, turnId: report.turnId, node: this.#o.nodeId, report, relay: errorText(answer.error) } };
  }

  /**
   * Alone: the running turn is stopped by the runner; a stop for a turn that has not started is
   * kept in this server's book (not the runner's, whose total bound any client could fill), and
   * `#startTurn` starts that turn cancelled with it.
   */
  async #local(sessionId: string, options: { reason?: string; turnId?: string }): Promise<StopReply> {
    const { turnId } = options;
    if (turnId === undefined || this.#o.localTurn(sessionId) === turnId) {
      const answer = await stopAnswer(this.#o.runner, sessionId, options, this.#o.nodeId);
      return { status: answer.outcome === 'refused' ? 429 : 200, body: answer };
    }
    const used = this.#o.turnUsed(turnId);
    if (used === 'ledger') return { status: 200, body: { outcome: 'already_finished', sessionId, turnId } };
    if (used === 'running') return { status: 200, body: { outcome: 'not_found', sessionId } }; // another session's turn
    const why = this.#kept.refusal(sessionId, turnId);
    if (why !== undefined) return { status: 429, body: refused(sessionId, turnId, why) };
    const kept = this.#kept.add(sessionId, turnId, options.reason ?? StopReasons.user);
    return { status: 200, body: { outcome: 'pending', sessionId, turnId, expiresAt: kept.expiresAt } };
  }

  /** True when the session's turn `turnId` runs now, here or anywhere in the fleet. */
  async #runs(sessionId: string, turnId: string): Promise<boolean> {
    if (this.#o.localTurn(sessionId) === turnId) return true;
    if (this.#o.fleet === undefined) return false;
    try {
      const live = await this.#o.fleet.turn(sessionId);
      return live !== null && live.turnId === turnId && (live.status === 'running' || live.status === 'cancelling');
    } catch {
      return false;
    }
  }
}

/** The answer to a stop the book cannot keep (429): the turn is not stopped. */
function refused(sessionId: string, turnId: string, why: KeepRefusal): Record<string, unknown> {
  const error = why === 'session_full'
    ? `stop: not kept (session_full): the session has ${MAX_KEPT_STOPS_PER_SESSION} stops waiting for turns that have not started; the turn is not stopped`
    : `stop: not kept (${why}): the turn has not started and no more stops can wait for turns now; the turn is not stopped`;
  return { outcome: 'refused', sessionId, turnId, why, error };
}

/**
 * Stops the session's turn (or `turnId`) through `runner.requestStop` and answers in the fleet's
 * `StopAnswer` shapes: `stopped` with the report; `pending` for a turn id that has not started
 * (kept until `expiresAt`: its run will start cancelled); `refused` when such a stop could not be
 * kept (`why`: the session's or the runner's book is full), so the client knows its Stop is not in
 * force; `already_finished` for a turn that is over; `not_found` when nothing runs to stop.
 */
export async function stopAnswer(runner: TurnRunner, sessionId: string, options: { reason?: string; turnId?: string }, nodeId: string): Promise<LocalStopAnswer> {
  const answer = runner.requestStop(sessionId, options);
  switch (answer.outcome) {
    case 'stopping': return { outcome: 'stopped', sessionId, turnId: answer.turnId, node: nodeId, report: await answer.report };
    case 'pending': return { outcome: 'pending', sessionId, turnId: answer.turnId, expiresAt: answer.expiresAt };
    case 'already_finished': return { outcome: 'already_finished', sessionId, turnId: answer.turnId };
    case 'refused': return {
      outcome: 'refused', sessionId, turnId: answer.turnId, why: answer.why,
      error: `stop: not kept (${answer.why}): the turn has not started and no more stops can wait for turns now; the turn is not stopped`,
    };
    default: return { outcome: 'not_found', sessionId };
  }
}

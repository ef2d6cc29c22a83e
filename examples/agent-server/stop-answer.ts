/**
 * A Stop over HTTP: the answer of `fleet.stop` or, alone, of `runner.requestStop` — the same words
 * either way — with the HTTP status its outcome calls for: a stop that could not be kept is 429
 * (never answered as if in force), Redis away is 503. A stop for a turn that has not started is
 * admitted by the server's own book (kept-stops.ts: a session's first one always has room,
 * whoever else sends stops); alone it is kept there, with a fleet in Redis.
 */
import { StopReasons, type TurnRunner } from '../../src/index.js';
import type { Fleet } from '../../src/fleet/index.js';
import { KeptStops, MAX_KEPT_STOPS_PER_SESSION, type KeepRefusal, type KeptStop } from './kept-stops.js';
import { errorText } from './runner-events.js';

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

type Options = { reason?: string; turnId?: string };

/** Takes the Stops of every client. */
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
  async stop(sessionId: string, options: Options): Promise<StopReply> {
    const { turnId } = options;
    if (turnId === undefined || await this.#runs(sessionId, turnId)) return this.#reply(await this.#answer(sessionId, options));
    if (this.#o.fleet === undefined) {
      const used = this.#o.turnUsed(turnId);
      if (used === 'ledger') return this.#reply(this.#o.runner.requestStop(sessionId, options));
      if (used === 'running') return { status: 200, body: { outcome: 'not_found', sessionId } }; // another session's turn
    }
    // A stop for a turn that has not started would be kept: this book admits it first.
    const why = this.#kept.refusal(sessionId, turnId);
    if (why !== undefined) return { status: 429, body: refused(sessionId, turnId, why) };
    const reason = options.reason ?? StopReasons.user;
    if (this.#o.fleet === undefined) {
      const kept = this.#kept.add(sessionId, turnId, reason);
      return { status: 200, body: { outcome: 'pending', sessionId, turnId, reason, graceMs: this.#o.runner.graceMs, expiresAt: kept.expiresAt } };
    }
    const reply = await this.#reply(await this.#answer(sessionId, options));
    if (reply.body.outcome === 'pending') this.#kept.add(sessionId, turnId, reason);
    return reply;
  }

  /** The answer's HTTP reply: a stop under way awaited, a stop not kept 429, Redis away 503. */
  async #reply(answer: Answer): Promise<StopReply> {
    switch (answer.outcome) {
      case 'stopping': return { status: 200, body: { outcome: 'stopped', sessionId: answer.sessionId, turnId: answer.turnId, node: this.#o.nodeId, report: await answer.report } };
      case 'refused': return { status: 429, body: refused(answer.sessionId, answer.turnId, answer.why) };
      case 'relay_unavailable': return { status: 503, body: { ...answer, error: errorText(answer.error) } };
      default: return { status: 200, body: answer };
    }
  }

  /** The fleet's answer; Redis away, a turn running here is still stopped here (a local stop needs no relay). */
  async #answer(sessionId: string, options: Options): Promise<Answer> {
    const { fleet, runner, nodeId } = this.#o;
    if (fleet === undefined) return runner.requestStop(sessionId, options);
    const answer = await fleet.stop(sessionId, options);
    if (answer.outcome !== 'relay_unavailable' || this.#o.localTurn(sessionId) === undefined) return answer;
    const report = await runner.stop(sessionId, options);
    return report === null ? answer : { outcome: 'stopped', sessionId, turnId: report.turnId, node: nodeId, report, relay: errorText(answer.error) };
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

/** A stop's answer before its HTTP reply: the runner's or the fleet's words. */
type Answer = ReturnType<TurnRunner['requestStop']> | Awaited<ReturnType<Fleet['stop']>> | (Record<string, unknown> & { outcome: 'stopped' });

/** The answer to a stop that cannot be kept (429): the turn is not stopped. */
function refused(sessionId: string, turnId: string | undefined, why: KeepRefusal | string): Record<string, unknown> {
  const error = why === 'session_full'
    ? `stop: not kept (session_full): the session has ${MAX_KEPT_STOPS_PER_SESSION} stops waiting for turns that have not started; the turn is not stopped`
    : `stop: not kept (${why}): the turn has not started and no more stops can wait for turns now; the turn is not stopped`;
  return { outcome: 'refused', sessionId, turnId, why, error };
}

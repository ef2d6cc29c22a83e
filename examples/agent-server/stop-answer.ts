/**
 * A Stop over HTTP: the answer of `fleet.stop` or, alone, of `runner.requestStop` — the same words
 * either way — with the HTTP status its outcome calls for: a stop that could not be kept is 429
 * (never answered as if in force), Redis away is 503. One client's kept stops are bounded
 * (client-stops.ts).
 */
import type { StopRequest, TurnRunner } from '../../src/index.js';
import type { Fleet, StopAnswer } from '../../src/fleet/index.js';
import { ClientStops, MAX_KEPT_STOPS_PER_CLIENT } from './client-stops.js';
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
}

type Options = { reason?: string; turnId?: string };

/** Takes the Stops of every client. */
export class StopDesk {
  readonly #o: StopDeskOptions;
  readonly #clients: ClientStops;

  constructor(options: StopDeskOptions) {
    this.#o = options;
    this.#clients = new ClientStops(options.runner.pendingStopMs);
    options.runner.on('turn_started', ({ sessionId, turnId }) => this.started(sessionId, turnId));
  }

  /** The session's turn `turnId` starts here (or its Send landed here): a stop kept for it no longer counts against its client. */
  started(sessionId: string, turnId: string): void {
    this.#clients.started(sessionId, turnId);
  }

  /** Stops the session's turn (or `turnId`) for `client` (its remote address). */
  async stop(client: string, sessionId: string, options: Options): Promise<StopReply> {
    const { turnId } = options;
    if (turnId !== undefined && !this.#clients.hasRoom(client) && !(await this.#runs(sessionId, turnId))) {
      return { status: 429, body: { outcome: 'refused', sessionId, turnId, why: 'client_full',
        error: `stop: not kept: this client has ${MAX_KEPT_STOPS_PER_CLIENT} stops waiting for turns that have not started; the turn is not stopped` } };
    }
    const answer = await this.#answer(sessionId, options);
    if (answer.outcome === 'pending') this.#clients.kept(client, sessionId, answer.turnId);
    switch (answer.outcome) {
      case 'stopping': return { status: 200, body: { outcome: 'stopped', sessionId, turnId: answer.turnId, node: this.#o.nodeId, report: await answer.report } };
      case 'refused': return { status: 429, body: { ...answer, error: `stop: not kept (${answer.why}): the turn has not started and no more stops can wait for it now; the turn is not stopped` } };
      case 'relay_unavailable': return { status: 503, body: { ...answer, error: errorText(answer.error) } };
      default: return { status: 200, body: answer };
    }
  }

  /** The fleet's answer; Redis away, a turn running here is still stopped here (a local stop needs no relay). */
  async #answer(sessionId: string, options: Options): Promise<StopAnswer | StopRequest | Record<string, unknown> & { outcome: 'stopped' }> {
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

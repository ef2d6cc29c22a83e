/**
 * The agent server: an HTTP API over one `TurnRunner` (and, with `--redis`, a `Fleet`), plus the
 * page in public/. Routes, in the order a page uses them:
 *
 *   GET  /                                   the page (public/index.html, app.js, style.css)
 *   GET  /api/sessions/:sessionId/events     the session's events from the ledger, then live (fullstop/http `eventStream`)
 *   POST /api/sessions/:sessionId/turns      { prompt, turnId? } → 202 { turnId, node } once it started (409 while a turn runs)
 *   POST /api/sessions/:sessionId/stop       { reason?, turnId? } → the stop's answer (fullstop/http `stopResponse`)
 *   POST /api/questions/:questionId/answer   { answer } → { accepted, outcome }
 *   GET  /api/sessions/:sessionId/history    the session's ledger entries
 *   GET  /api/sessions/:sessionId/turns/:turnId/report   the StopReport of a turn stopped here (the page's timeline)
 *   GET  /healthz                            { ok, nodeId, stats }
 *
 * Every refusal is a 4xx `{ error }` whose message names the field at fault; nothing a client
 * sends can take the server down.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { randomUUID } from 'node:crypto';
import { ShuttingDownError, StopReasons, type LedgerStore, type TurnOutcome, type TurnPool, type TurnRunner } from '../../src/index.js';
import type { Fleet } from '../../src/fleet/index.js';
import { eventStream, sendResponse, stopResponse, streamStats, toRequest } from '../../src/http/index.js';
import { answerQuestion } from './answers.js';
import { agentTurn } from './agent.js';
import { discardBody, errorText, HttpError, idParam, only, readJson, sendJson, stringField } from './http.js';
import { RequestGuard } from './guard.js';
import { servePage } from './page.js';
import { StopDesk } from './stop-answer.js';
import type { LanguageModelV3 } from '@ai-sdk/provider';
import { Sessions } from './sessions.js';
import { StopReports } from './stop-reports.js';

/** Longest prompt accepted, in characters. */
export const MAX_PROMPT_CHARS = 4000;
/** Longest answer to a question, in characters. */
const MAX_ANSWER_CHARS = 4000;
/** Event streams open at once (`--max-streams`): past it a new one is refused (503), so clients cannot hold sockets without end. */
export const DEFAULT_MAX_STREAMS = 5000;
/** How long a Send (or a report) waits for the session's turn to be let go when it is about to be (#refuseIfBusy). */
const SETTLING_MS = 250;

/** What the server runs on; the caller creates these and closes them after `shutdown`. */
export interface AgentServerOptions {
  runner: TurnRunner;
  pool: TurnPool;
  /** The history: a file `Ledger`, or a `PgLedger` every instance shares (history.ts); the event streams read it. */
  ledger: LedgerStore;
  /** The model the agent streams from (model.ts: the scripted one, or a provider's). */
  model: LanguageModelV3;
  nodeId: string;
  /** Where index.html, app.js and style.css are read from (on every request: edit and reload). */
  publicDir: string;
  /**
   * With a fleet, turns run through it (registered in Redis) and a stop goes through it, so a
   * stop sent to any instance reaches the one running the turn.
   */
  fleet?: Fleet;
  /**
   * `Host` names allowed besides the bound address and the loopback names (guard.ts).
   * @default []
   */
  allowedHosts?: readonly string[];
  /** When set, every API request must carry `Authorization: Bearer <token>` (guard.ts). */
  token?: string;
  /**
   * Event streams open at once, all sessions together; past it `GET …/events` is refused with 503
   * (and `retry-after`) until one closes.
   * @default DEFAULT_MAX_STREAMS (5000)
   */
  maxStreams?: number;
}

/**
 * The HTTP server over one runner (and maybe a fleet). Create it, `listen`, and call `shutdown`
 * from the SIGTERM handler; main.ts shows the whole life cycle.
 */
export class AgentServer {
  readonly http: Server;
  readonly nodeId: string;
  readonly #options: AgentServerOptions;
  readonly #sessions: Sessions;
  readonly #stops: StopDesk;
  readonly #reports = new StopReports();
  /** Each turn this server started, until its outcome is in (shutdown waits for them). */
  readonly #running = new Map<string, Promise<void>>();
  /** Sends waiting for their turn to start, by turn id: resolved by the runner's `turn_started`. */
  readonly #starting = new Map<string, () => void>();
  /** Why a turn whose Send waits failed before it started. */
  readonly #refusals = new Map<string, unknown>();
  readonly #guard: RequestGuard;
  #closing: Promise<void> | undefined;

  constructor(options: AgentServerOptions) {
    this.#options = options;
    this.nodeId = options.nodeId;
    this.#sessions = new Sessions();
    this.#stops = new StopDesk({
      runner: options.runner, fleet: options.fleet,
      localTurn: (id) => this.#sessions.turnOf(id),
      turnUsed: (turnId) => this.#running.has(turnId) ? 'running' : options.ledger.hasTurn(turnId) ? 'ledger' : undefined,
    });
    this.#guard = new RequestGuard({ allowedHosts: options.allowedHosts ?? [], token: options.token });
    this.http = createServer((req, res) => { void this.#handle(req, res); });
    const { runner } = options;
    runner.on('turn_started', ({ turnId }) => {
      const started = this.#starting.get(turnId);
      this.#starting.delete(turnId);
      started?.();
    });
    // The end's event frees the session at once, so a Send right after the page saw the end is not a 409.
    for (const end of ['turn_completed', 'turn_failed'] as const) {
      runner.on(end, ({ sessionId, turnId }: { sessionId: string; turnId: string }) => this.#sessions.end(sessionId, turnId));
    }
    runner.on('turn_aborted', ({ sessionId, turnId, report }) => {
      this.#reports.add(turnId, report);
      this.#sessions.end(sessionId, turnId);
    });
  }

  /** Listens; resolves with the page's URL (with `#token=` when there is a token: the page reads it there). */
  listen(port: number, host: string): Promise<string> {
    return new Promise((resolve, reject) => {
      this.http.once('error', reject);
      this.http.listen(port, host, () => {
        this.http.off('error', reject);
        const address = this.http.address();
        const actual = typeof address === 'object' && address !== null ? address.port : port;
        this.#guard.listening(host, actual);
        const token = this.#options.token === undefined ? '' : `#token=${encodeURIComponent(this.#options.token)}`;
        resolve(`http://${host.includes(':') ? `[${host}]` : host}:${actual}/${token}`);
      });
    });
  }

  /** What /healthz reports. */
  stats(): Record<string, unknown> {
    const streams = streamStats(this.#options.runner);
    return {
      registry: this.#options.runner.registry.stats(),
      pool: this.#options.pool.stats(),
      sessions: this.#sessions.size,
      runningTurns: this.#running.size,
      sseClients: streams.streams,
      sseClientsDropped: streams.dropped,
      streamReadFailures: streams.readFailures,
      memory: process.memoryUsage(),
      ...(this.#options.fleet === undefined ? {} : { fleet: this.#options.fleet.stats() }),
    };
  }

  /**
   * Stops accepting requests and shuts the runner down (`runner.shutdown()`: every running turn
   * stopped with reason `cancel.shutdown`, its aborted outputs, marker and flush in the ledger,
   * and `run` refusing from now on), waits for the turns' outcomes, then ends every connection.
   * The pool, ledger and fleet belong to the caller, who closes them after this. A second call
   * returns the first one's promise.
   */
  shutdown(): Promise<void> {
    this.#closing ??= this.#shutDown();
    return this.#closing;
  }

  async #shutDown(): Promise<void> {
    const stopped = this.#options.runner.shutdown({ reason: StopReasons.shutdown });
    const closed = new Promise<void>((resolve) => this.http.close(() => resolve()));
    await stopped;
    await Promise.allSettled(this.#running.values());
    // Ends the event streams too: each one's body is cancelled when its connection closes.
    this.http.closeAllConnections();
    await closed;
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    try {
      await this.#route(req, res);
    } catch (error) {
      if (res.headersSent) {
        res.destroy();
        return;
      }
      if (error instanceof HttpError) {
        sendJson(res, error.status, { error: error.message });
        // A body refused unread (413) is read and dropped (bounded), so the client reads the answer.
        if (error.status === 413) discardBody(req);
      } else {
        console.error(`agent-server: ${req.method} ${req.url}:`, error);
        sendJson(res, 500, { error: `internal error: ${(error as Error)?.message ?? String(error)}` });
      }
    }
  }

  async #route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = new URL(req.url ?? '/', 'http://localhost').pathname;
    const method = req.method ?? 'GET';
    this.#guard.check(req, path);
    if (await servePage(this.#options.publicDir, method, path, res)) return;
    if (path === '/healthz') {
      only(method, 'GET', path);
      return sendJson(res, 200, { ok: this.#closing === undefined, nodeId: this.nodeId, stats: this.stats() });
    }
    let match = /^\/api\/sessions\/([^/]+)\/(turns|events|stop|history)$/.exec(path);
    if (match !== null) {
      const sessionId = idParam('sessionId', match[1]);
      switch (match[2]) {
        case 'turns': only(method, 'POST', path); return this.#startTurn(sessionId, req, res);
        case 'events': only(method, 'GET', path); return this.#events(sessionId, req, res);
        case 'stop': only(method, 'POST', path); return this.#stop(sessionId, req, res);
        default: only(method, 'GET', path); return this.#history(sessionId, res);
      }
    }
    match = /^\/api\/sessions\/([^/]+)\/turns\/([^/]+)\/report$/.exec(path);
    if (match !== null) {
      only(method, 'GET', path);
      idParam('sessionId', match[1]);
      const turnId = idParam('turnId', match[2]);
      return this.#settling(turnId).then(() => {
        const report = this.#reports.get(turnId);
        if (report === undefined) throw new HttpError(404, `turnId: no stop report of ${JSON.stringify(turnId)} on this server`);
        sendJson(res, 200, report);
      });
    }
    match = /^\/api\/questions\/([^/]+)\/answer$/.exec(path);
    if (match !== null) {
      only(method, 'POST', path);
      return this.#answer(idParam('questionId', match[1]), req, res);
    }
    throw new HttpError(404, `path: no route for ${method} ${path}`);
  }

  async #startTurn(sessionId: string, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = await readJson(req);
    const prompt = stringField(body, 'prompt', MAX_PROMPT_CHARS, true)!;
    // The page names its turn itself, so a Stop it sends before this POST has landed can name it too.
    const given = stringField(body, 'turnId', 100, false);
    const turnId = given === undefined ? `turn-${randomUUID()}` : idParam('turnId', given);
    if (this.#closing !== undefined) throw new HttpError(503, 'server: shutting down');
    const { runner, fleet, model, pool, ledger } = this.#options;
    await this.#refuseIfBusy(sessionId);
    if (this.#sessions.full) throw new HttpError(503, 'sessionId: too many sessions in use; try again later');
    if (this.#running.has(turnId) || ledger.hasTurn(turnId)) {
      throw new HttpError(409, `turnId: ${JSON.stringify(turnId)} is already used; a turn id is used once`);
    }
    if (fleet !== undefined) {
      // The session's turn may run on another instance: ask Redis (the fleet also refuses a second
      // live turn itself, and then this Send is answered with its refusal).
      let live: Awaited<ReturnType<Fleet['turn']>>;
      try {
        live = await fleet.turn(sessionId);
      } catch (error) {
        throw new HttpError(503, `fleet: Redis cannot be reached (${errorText(error)}); try again`);
      }
      if (live !== null && (live.status === 'running' || live.status === 'cancelling')) {
        throw new HttpError(409, `sessionId: session ${JSON.stringify(sessionId)} already has a running turn (${live.turnId}) on node ${live.node}; stop it first`);
      }
      await this.#refuseIfBusy(sessionId);
    }
    this.#sessions.begin(sessionId, turnId);
    // A Stop that came before this Send: the turn starts cancelled, running nothing of its body.
    const kept = this.#stops.started(sessionId, turnId);
    const agent = agentTurn({ model, pool, ledger }, sessionId);
    // `input`: the ledger records the prompt on turn_started (the page shows it from there).
    const options = { turnId, input: prompt, ...(kept === undefined ? {} : { signal: AbortSignal.abort(kept.reason), signalReason: kept.reason }) };
    const started = new Promise<void>((resolve) => this.#starting.set(turnId, resolve));
    const run = fleet === undefined ? runner.run(sessionId, agent, options) : fleet.run<string>(sessionId, agent, options);
    const done = run.then(
      (outcome) => this.#settled(sessionId, turnId, outcome),
      (error: unknown) => this.#settled(sessionId, turnId, { status: 'failed', turnId, error }),
    ).finally(() => {
      this.#running.delete(turnId);
      this.#starting.delete(turnId);
    });
    this.#running.set(turnId, done);
    // Answered once the turn has started (its turn_started is in the ledger, so on every stream),
    // or with the refusal of a turn that never started: the page never waits for a turn that is not.
    const refusal = await Promise.race([started.then(() => undefined), done.then(() => this.#refusals.get(turnId))]);
    this.#starting.delete(turnId);
    this.#refusals.delete(turnId);
    if (refusal !== undefined) {
      throw new HttpError(refusal instanceof ShuttingDownError ? 503 : 409, `turn: not started: ${errorText(refusal)}`);
    }
    sendJson(res, 202, { turnId, node: this.nodeId });
  }

  /** A turn's outcome is in: its session is free; a turn that failed before it started leaves its error for its Send (still waiting). */
  #settled(sessionId: string, turnId: string, outcome: TurnOutcome<unknown>): void {
    this.#sessions.end(sessionId, turnId);
    if (outcome.status === 'failed' && this.#starting.has(turnId)) this.#refusals.set(turnId, outcome.error);
  }

  /** The session's events through fullstop/http: the ledger's entries after `Last-Event-ID`, then live. */
  async #events(sessionId: string, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const max = this.#options.maxStreams ?? DEFAULT_MAX_STREAMS;
    if (streamStats(this.#options.runner).streams >= max) {
      res.setHeader('retry-after', '5');
      throw new HttpError(503, `events: ${max} event streams are open, the most this server keeps; try again later`);
    }
    // A stream takes no session slot: a thousand streams on made-up ids leave room for real turns.
    await sendResponse(res, eventStream(this.#options.runner, toRequest(req, res), { sessionId, store: this.#options.ledger }));
  }

  async #stop(sessionId: string, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const runner = this.#options.fleet === undefined ? undefined : this.#options.runner;
    await sendResponse(res, await stopResponse(this.#stops, toRequest(req, res), { sessionId, runner }));
  }

  async #answer(questionId: string, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = await readJson(req);
    const answer = stringField(body, 'answer', MAX_ANSWER_CHARS, true)!;
    const { status, body: reply } = await answerQuestion(this.#options.runner, this.#options.fleet, questionId, answer);
    sendJson(res, status, reply);
  }

  async #history(sessionId: string, res: ServerResponse): Promise<void> {
    const entries = await this.#options.ledger.entries({ sessionId });
    if (entries.length === 0 && this.#sessions.turnOf(sessionId) === undefined) {
      throw new HttpError(404, `sessionId: no session ${JSON.stringify(sessionId)} in this server's history`);
    }
    sendJson(res, 200, { sessionId, entries });
  }

  /**
   * A 409 while the session's turn runs. The page sees a turn's end in the history, written a moment
   * (its flush) before the runner lets the turn go: a turn that ends within `SETTLING_MS` frees the
   * session for this Send instead.
   */
  async #refuseIfBusy(sessionId: string): Promise<void> {
    const turnId = this.#sessions.turnOf(sessionId);
    if (turnId === undefined) return;
    await this.#settling(turnId);
    if (this.#sessions.turnOf(sessionId) !== undefined) {
      throw new HttpError(409, `sessionId: session ${JSON.stringify(sessionId)} already has a running turn (${turnId}); stop it first`);
    }
  }

  /** Resolves once the turn running here has ended, or after `SETTLING_MS`. */
  async #settling(turnId: string): Promise<void> {
    const done = this.#running.get(turnId);
    if (done === undefined) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([done, new Promise<void>((resolve) => { timer = setTimeout(resolve, SETTLING_MS); })]);
    clearTimeout(timer);
  }
}

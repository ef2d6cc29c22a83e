/**
 * `TurnRunner`: runs an agent turn's body with one token, and stops it in the order of docs/design.md
 * §2 (`#stopSequence`, the one function that holds that order).
 */

import { EventEmitter } from 'node:events';
import { randomUUID } from 'node:crypto';
import { CancelledError, checkFunction, checkId, checkMs, describe } from '../errors.js';
import { runInTurn } from '../token/context.js';
import { governStop, ownersOf } from '../token/owners.js';
import { TurnRegistry, turns } from '../token/registry.js';
import type { TurnPool } from '../pool/pool.js';
import { ActiveTurn, type PendingQuestion, type Turn, type TurnHost } from './active-turn.js';
import { abortedToolText, Ledger, TURN_ABORTED_MARKER } from './ledger.js';
import type { StopReport, TurnOutcome } from './report.js';

export interface TurnRunnerOptions {
  /** @default turns (the default registry) */
  registry?: TurnRegistry;
  /** The pool the turn's tools run on; kept as `runner.pool` for them. */
  pool?: TurnPool;
  /** Where history goes; without one, nothing is written (events still are). */
  ledger?: Ledger;
  /** Default grace of `stop()`. @default 100 */
  graceMs?: number;
}

const DEFAULT_GRACE_MS = 100;
/** Owner kinds the grace window waits for; questions only end by an answer or the hard stop. */
const SETTLING_KINDS = new Set(['task', 'process', 'call']);

/**
 * @example
 * const runner = new TurnRunner({ ledger: await Ledger.open('history.jsonl'), pool });
 * runner.on('turn_aborted', ({ report }) => console.log(report));
 * const outcome = runner.run('s1', async (turn) => {
 *   await turn.say('Looking…');
 *   return turn.tool('grep', { q }, (token) => exec('grep', ['-r', q], { token }));
 * });
 * stopButton.onclick = () => runner.stop('s1');
 */
export class TurnRunner extends EventEmitter implements TurnHost {
  readonly registry: TurnRegistry;
  readonly pool: TurnPool | undefined;
  readonly ledger: Ledger | undefined;
  readonly graceMs: number;
  /** The running turn of each session; no entry between turns. */
  readonly #active = new Map<string, ActiveTurn>();
  readonly #questions = new Map<string, PendingQuestion>();

  constructor(options: TurnRunnerOptions = {}) {
    super();
    if (options === null || typeof options !== 'object') throw new TypeError(`options: expected an object, got ${describe(options)}`);
    const { registry = turns, pool, ledger, graceMs = DEFAULT_GRACE_MS } = options;
    if (!(registry instanceof TurnRegistry)) throw new TypeError(`options.registry: expected a TurnRegistry, got ${describe(registry)}`);
    if (ledger !== undefined && !(ledger instanceof Ledger)) throw new TypeError(`options.ledger: expected a Ledger, got ${describe(ledger)}`);
    checkMs('options.graceMs', graceMs);
    this.registry = registry;
    this.pool = pool;
    this.ledger = ledger;
    this.graceMs = graceMs;
  }

  /** Run one turn of `sessionId`. Resolves (never rejects for the body's sake) with the outcome. */
  async run<T>(sessionId: string, body: (turn: Turn) => Promise<T>, options: { turnId?: string } = {}): Promise<TurnOutcome<T>> {
    checkId('sessionId', sessionId);
    checkFunction('body', body);
    if (options?.turnId !== undefined) checkId('options.turnId', options.turnId);
    if (this.#active.has(sessionId)) throw new Error(`TurnRunner.run: session ${JSON.stringify(sessionId)} already has a running turn; stop it first`);
    const turnId = options?.turnId ?? `turn-${randomUUID()}`;
    const token = this.registry.beginTurn(sessionId, turnId);
    const turn = new ActiveTurn(this, sessionId, turnId, token);
    this.#active.set(sessionId, turn);
    // A cancel from elsewhere (registry.markCancelled, cancelTurn() in a worker) is a stop too.
    const onAbort = () => { if (!turn.finishing) void this.#beginStop(turn, this.graceMs, String(token.reason)); };
    try {
      await turn.write({ type: 'turn_started' }, 'turn_started', {});
      token.signal.addEventListener('abort', onAbort, { once: true });
      if (token.isCancelled()) onAbort();
      const body$ = Promise.resolve().then(() => runInTurn(token, () => body(turn)));
      const ended = await Promise.race([
        body$.then((value) => ({ value }), (error: unknown) => ({ error, failed: true as const })),
        turn.stopStarted.then(() => ({ stopped: true as const })),
      ]);
      if ('stopped' in ended || turn.stopping !== undefined) {
        const report = await turn.stopping!;
        return { status: 'cancelled', turnId, report, error: new CancelledError(`turn ${turnId} was stopped`, { reason: report.reason, sessionId, turnId }) };
      }
      turn.finishing = true;
      const error = turn.fatal ?? ('failed' in ended ? ended.error : undefined);
      if (error !== undefined) {
        await turn.write({ type: 'status', status: 'failed', reason: error instanceof Error ? error.message : String(error) }, 'turn_failed', { error });
        return { status: 'failed', turnId, error };
      }
      const value = (ended as { value: T }).value;
      await turn.write({ type: 'status', status: 'completed' }, 'turn_completed', { value });
      return { status: 'completed', turnId, value };
    } finally {
      turn.closed = true;
      token.signal.removeEventListener('abort', onAbort);
      this.#active.delete(sessionId);
      this.registry.endTurn(sessionId, token);
    }
  }

  /** Stop the session's running turn; `null` between turns. A repeat stop joins the first. */
  stop(sessionId: string, options: { graceMs?: number; reason?: string } = {}): Promise<StopReport | null> {
    checkId('sessionId', sessionId);
    if (options === null || typeof options !== 'object') throw new TypeError(`options: expected an object, got ${describe(options)}`);
    checkMs('options.graceMs', options.graceMs);
    if (options.reason !== undefined) checkId('options.reason', options.reason);
    const turn = this.#active.get(sessionId);
    if (turn === undefined || turn.finishing) return Promise.resolve(null);
    return this.#beginStop(turn, options.graceMs ?? this.graceMs, options.reason ?? 'cancel.user');
  }

  /** Answer a pending question, once: false if it is unknown, answered or cancelled. */
  answer(questionId: string, answer: unknown): boolean {
    checkId('questionId', questionId);
    const pending = this.#questions.get(questionId);
    if (pending === undefined) return false;
    pending.resolve(answer);
    return true;
  }

  pause(): void { this.registry.pause(); }
  resume(): void { this.registry.resume(); }
  get paused(): boolean { return this.registry.paused; }

  /** @internal TurnHost */
  addQuestion(questionId: string, question: PendingQuestion): void { this.#questions.set(questionId, question); }
  /** @internal TurnHost */
  removeQuestion(questionId: string): void { this.#questions.delete(questionId); }

  #beginStop(turn: ActiveTurn, graceMs: number, reason: string): Promise<StopReport> {
    // 1. Already stopping → the stop under way (a repeat never resets the grace window).
    return turn.stop(() => this.#stopSequence(turn, graceMs, reason));
  }

  /** docs/design.md §2, steps 2–8, in order. */
  async #stopSequence(turn: ActiveTurn, graceMs: number, reason: string): Promise<StopReport> {
    const t0 = performance.now();
    const since = () => performance.now() - t0;
    const { sessionId, turnId, token } = turn;

    // 2. Intent: `cancelling` is durable before any signal.
    await turn.write({ type: 'status', status: 'cancelling', reason });
    await this.ledger?.flush();

    // 3. Signal: the stop's grace governs every owner of the tree; then trip the token
    //    (slots + notify wake workers, `signal` unwinds awaits, exec groups get SIGTERM).
    governStop(token);
    token.cancel(reason);
    const signalledAt = since();

    // 4. Grace: up to graceMs for the owners to settle; ends as soon as they have.
    const settling = ownersOf(token).filter((o) => SETTLING_KINDS.has(o.kind));
    let timer: NodeJS.Timeout | undefined;
    const settledCooperatively = await Promise.race([
      Promise.all(settling.map((o) => o.settled)).then(() => true),
      new Promise<false>((resolve) => { timer = setTimeout(() => resolve(false), graceMs); }),
    ]);
    clearTimeout(timer);
    const settledAt = since();

    // 5. Hard stop what is left: terminate workers, kill process groups, reject questions.
    const left = ownersOf(token);
    const hardStopped = {
      workers: left.filter((o) => o.kind === 'task').length,
      processGroups: left.filter((o) => o.kind === 'process').length,
      questions: left.filter((o) => o.kind === 'question').length,
    };
    await Promise.allSettled(left.map((o) => o.hardStop()));
    const hardStopAt = since();

    // 6. History: an aborted output for each unfinished call (finished ones keep their real
    //    output), then the marker; from here on nothing else of this turn is written.
    const history: Promise<void>[] = [];
    for (const [callId, call] of turn.calls) {
      if (call.finished) continue;
      const output = abortedToolText(performance.now() - call.recordedAt);
      history.push(turn.write({ type: 'tool_aborted', callId, output }));
    }
    history.push(turn.write({ type: 'turn_aborted', text: TURN_ABORTED_MARKER }));
    history.push(turn.write({ type: 'status', status: 'cancelled', reason }));
    turn.closed = true;
    await Promise.all(history);
    const markerAt = since();

    // 7. Flush (fdatasync).
    await this.ledger?.flush();
    const flushedAt = since();

    // 8. Emit; the turn is `cancelled` (a user cancel is never `error`/`failed`).
    const report: StopReport = {
      sessionId, turnId, reason, graceMs, settledCooperatively,
      signalledAt, settledAt, hardStopAt, markerAt, flushedAt, emittedAt: since(), hardStopped,
    };
    this.emit('turn_aborted', { sessionId, turnId, report });
    return report;
  }
}

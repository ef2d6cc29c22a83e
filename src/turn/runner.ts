/**
 * `TurnRunner`: runs an agent turn's body with one token, and stops it in the order of docs/design.md
 * §2 (`#stopSequence`, the one function that holds that order).
 *
 * Rules kept here:
 * 1. Any cancel of a turn's token is a stop under this runner's grace from its first moment:
 *    `runner.stop`, `registry.markCancelled`, `cancelTurn()` in a worker, the abort of a caller's
 *    signal given to `run` (`options.signal`: a stop with reason `signalReason`, the signal's own
 *    reason its `detail`, never its reason — DESIGN §11.2). The token is governed
 *    (`governStop`) as it is made, so an owner told of the cancel defers to the runner
 *    (`isStopGoverned`), and its abort listener, added before anything else can see the token,
 *    begins the stop; so no pool task or exec child starts a grace timer of its own for it.
 * 2. A stop always happens: a failing ledger is reported (`StopReport.ledgerError`), never a reason
 *    to skip the signal, the grace, the hard stop or the event.
 * 3. A listener cannot break a turn: events go through `notify`, which calls every listener and
 *    turns a throw into a process warning.
 * 4. A terminal event (`turn_completed`, `turn_failed`, `turn_aborted`) is emitted after the turn
 *    is released (`ActiveTurn.release`: the session forgotten, the token retired), so a listener
 *    may start the session's next turn at once.
 */

import { EventEmitter } from 'node:events';
import { randomUUID } from 'node:crypto';
import { MAX_ENDED_TURNS_KEPT, MAX_PENDING_STOPS, MAX_PENDING_STOPS_PER_SESSION } from '../constants.js';
import {
  cancelledError, checkFunction, checkId, SessionBusyError, ShuttingDownError, TurnIdUsedError,
} from '../errors.js';
import { runInTurn } from '../token/context.js';
import { governStop } from '../token/owners.js';
import type { TurnRegistry } from '../token/registry.js';
import type { TurnPool } from '../pool/pool.js';
import { ActiveTurn, type Turn, type TurnHost } from './active-turn.js';
import { setRunnerHooks, type BodyScope } from './runner-hooks.js';
import { describeStore, type LedgerStore } from '../ledger/store.js';
import type { TurnEntryBody } from '../ledger/entry.js';
import { PendingStops } from './pending-stops.js';
import { EndedTurns } from './ended-turns.js';
import { nodeOf, Questions, type AnswerReply } from './answer-reply.js';
import { messageOf, renderSafely } from '../base/render.js';
import { callEach } from './listeners.js';
import type { StopReport, TurnOutcome } from './report.js';
import type { StopRequest } from './stop-request.js';
import type { TurnRunnerEventName, TurnRunnerEvents } from './runner-events.js';
import { afterGates, type QuestionEvent } from './question-gates.js';
import {
  checkRunnerOptions, checkRunOptions, checkStopOptions,
  type RunOptions, type ShutdownOptions, type StopOptions, type TurnRunnerOptions,
} from './runner-options.js';
import { hardStopLeft, isBodyAbandoned, StopHistory, waitForGrace } from './stop-steps.js';
import { stopDetail } from './stop-detail.js';
import { Shutdown } from './shutdown.js';

export type { RunOptions, ShutdownOptions, StopOptions, TurnRunnerOptions } from './runner-options.js';
export type { StopRequest, StopRefusal } from './stop-request.js';
export type { AnswerReply } from './answer-reply.js';

export { LISTENER_WARNING } from './listeners.js';

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
export class TurnRunner extends EventEmitter<TurnRunnerEvents> {
  /** Where the turns' tokens come from. */
  readonly registry: TurnRegistry;
  /** The pool given to the constructor, for the turns' tools; `undefined` when none was. */
  readonly pool: TurnPool | undefined;
  /** Where the history goes; `undefined`: nothing is written (events still fire). */
  readonly ledger: LedgerStore | undefined;
  /** The default grace of a stop, in ms. */
  readonly graceMs: number;
  /** How long a stop of a turn that has not started yet is kept for it, in ms. */
  readonly pendingStopMs: number;
  /** The most UTF-8 bytes of a tool output the history records (`TurnRunnerOptions.maxOutputBytes`). */
  readonly maxOutputBytes: number;
  /** The running turn of each session; no entry between turns. */
  readonly #active = new Map<string, ActiveTurn>();
  /** The turn ids of `#active`, so a stop asks "is it running?" in O(1). */
  readonly #runningTurnIds = new Set<string>();
  readonly #questions = new Questions(); // open, and answered while their turn runs
  readonly #pendingStops: PendingStops;
  /** How the turns this runner ended lately ended (`already_finished` says it). */
  readonly #ended = new EndedTurns(MAX_ENDED_TURNS_KEPT);
  /** `shutdown()`: once begun, `run` refuses. */
  readonly #shutdown = new Shutdown();
  /** Wrappers of every turn's body (`RunnerHooks.bodyScopes`, reached through `runnerHooks`). */
  readonly #bodyScopes = new Set<BodyScope>();
  /** What this runner's turns reach of it (active-turn.ts): not the runner itself, so none of it is a member. */
  readonly #host: TurnHost;

  /** Throws a TypeError or RangeError naming the option for a bad one (see `TurnRunnerOptions`). */
  constructor(options?: TurnRunnerOptions) {
    const checked = checkRunnerOptions(options);
    super();
    this.registry = checked.registry;
    this.pool = checked.pool;
    this.ledger = checked.ledger;
    this.graceMs = checked.graceMs;
    this.pendingStopMs = checked.pendingStopMs;
    this.maxOutputBytes = checked.maxOutputBytes;
    this.#pendingStops = new PendingStops(checked.pendingStopMs, MAX_PENDING_STOPS_PER_SESSION, MAX_PENDING_STOPS);
    this.#host = {
      ledger: this.ledger,
      maxOutputBytes: this.maxOutputBytes,
      notify: (event, payload) => this.#notify(event, payload),
      addQuestion: (questionId, question) => this.#questions.add(questionId, question),
      removeQuestion: (questionId) => this.#questions.remove(questionId),
    };
    setRunnerHooks(this, { bodyScopes: this.#bodyScopes, holdShutdown: (hold) => this.#shutdown.hold(hold) });
  }

  /**
   * Run one turn of `sessionId`. Resolves with the outcome (never rejects for the body's sake, for
   * a stop's, or for a ledger that fails once the body runs: see `ledgerError`). Rejects, starting
   * nothing, for bad arguments, a session that already has a running turn (`SessionBusyError`), a
   * `turnId` already used (running here, or in the ledger: `TurnIdUsedError`), a runner shutting
   * down (`ShuttingDownError`), or a ledger that cannot record `turn_started`. A turn whose id a
   * stop was waiting for (`stop(sessionId, { turnId })` before it started) records `turn_started`
   * and is stopped at once: nothing of its body runs, and it resolves `cancelled`.
   */
  async run<T>(sessionId: string, body: (turn: Turn) => Promise<T>, options?: RunOptions): Promise<TurnOutcome<T>> {
    checkId('sessionId', sessionId);
    checkFunction('body', body);
    const { turnId: given, signal, signalReason, input } = checkRunOptions(options);
    if (this.#shutdown.begun) throw new ShuttingDownError('TurnRunner.run: the runner is shutting down; it starts no turn');
    if (this.#active.has(sessionId)) {
      throw new SessionBusyError(`TurnRunner.run: session ${JSON.stringify(sessionId)} already has a running turn; stop it first`, sessionId);
    }
    const turnId = given ?? `turn-${randomUUID()}`;
    this.#refuseUsedTurnId(turnId);
    const pending = given === undefined ? undefined : this.#pendingStops.take(sessionId, turnId);
    const token = this.registry.beginTurn(sessionId, turnId);
    // Rule 1: governed from its first moment; owners defer to this runner once the root is cancelled.
    governStop(token);
    const turn = new ActiveTurn(this.#host, sessionId, turnId, token);
    this.#active.set(sessionId, turn);
    this.#runningTurnIds.add(turnId);
    // Rule 1: before anything else can see the token.
    const onAbort = () => {
      if (!turn.finishing) void this.#beginStop(turn, this.graceMs, renderSafely(token.reason));
    };
    token.signal.addEventListener('abort', onAbort, { once: true });
    // As `runner.stop(sessionId, { reason: signalReason })`: the intent is durable before the token trips.
    const onCallerAbort = () => {
      if (!turn.finishing) void this.#beginStop(turn, this.graceMs, signalReason!, stopDetail(signal!.reason));
    };
    turn.onRelease(() => {
      turn.closed = true;
      token.signal.removeEventListener('abort', onAbort);
      signal?.removeEventListener('abort', onCallerAbort);
      if (this.#active.get(sessionId) === turn) this.#active.delete(sessionId);
      this.#runningTurnIds.delete(turnId);
      this.#questions.endTurn(turnId);
      this.registry.endTurn(sessionId, token);
    });
    // `turn_started` is queued first, so a stop that begins right below records its intent after it.
    const started = turn.write(input === undefined ? { type: 'turn_started' } : { type: 'turn_started', input },
      'turn_started', input === undefined ? {} : { input });
    if (pending !== undefined) void this.#beginStop(turn, pending.graceMs, pending.reason);
    if (signal?.aborted) onCallerAbort();
    else signal?.addEventListener('abort', onCallerAbort, { once: true });
    try {
      let refused: unknown;
      try {
        await started;
      } catch (error) {
        if (turn.stopping === undefined) throw error; // a stop under way reports it as ledgerError
        // The id is another turn's (another instance runs it): the stop under way writes nothing into it.
        if (error instanceof TurnIdUsedError) {
          turn.closed = true;
          refused = error;
        }
      }
      const body$ = turn.runBody(() => this.#inBodyScopes(turnId, () => runInTurn(token, () => body(turn.facade))));
      const ended = body$ === undefined ? undefined : await Promise.race([body$, turn.stopStarted.then(() => undefined)]);
      if (ended === undefined || turn.stopping !== undefined) {
        const report = await turn.stopping!;
        if (refused !== undefined) throw refused;
        // Stack-less (`cancelledError`): a stop is control flow, and a trace of the runner's own
        // frames, taken for every stopped turn, tells its reader nothing.
        return { status: 'cancelled', turnId, report, error: cancelledError(`turn ${turnId} was stopped`, { reason: report.reason, sessionId, turnId }) };
      }
      turn.finishing = true;
      this.#ended.add(turnId, !ended.ok || turn.fatal !== undefined ? 'failed' : 'completed');
      if (!ended.ok || turn.fatal !== undefined) {
        const error = turn.fatal ?? (ended as { error: unknown }).error;
        const ledgerError = await this.#end(turn, { type: 'status', status: 'failed', reason: messageOf(error) }, 'turn_failed', { error });
        return { status: 'failed', turnId, error, ...(ledgerError === undefined ? {} : { ledgerError }) };
      }
      const ledgerError = await this.#end(turn, { type: 'status', status: 'completed' }, 'turn_completed', { value: ended.value });
      return { status: 'completed', turnId, value: ended.value, ...(ledgerError === undefined ? {} : { ledgerError }) };
    } finally {
      turn.release();
    }
  }

  /** `run` inside every body scope (`#bodyScopes`), the first added outermost. */
  #inBodyScopes<T>(turnId: string, run: () => Promise<T>): Promise<T> {
    let inner = run;
    for (const scope of [...this.#bodyScopes].reverse()) {
      const next = inner;
      inner = () => scope(turnId, next) as Promise<T>;
    }
    return inner();
  }

  /**
   * Stop the session's running turn; `null` between turns. A repeat stop joins the first. With
   * `turnId`, only that turn: the running one if it is that turn; a turn that has not started and
   * is not in the ledger gets the stop (its reason and grace) when it starts (kept `pendingStopMs`;
   * `null` now), also while another turn of the session runs, which is not touched. `null` does not
   * tell a kept stop from nothing to stop or a refused one: `requestStop` does. Throws a TypeError or
   * RangeError naming the option for a bad one, and then starts nothing.
   */
  stop(sessionId: string, options?: StopOptions): Promise<StopReport | null> {
    const answer = this.requestStop(sessionId, options);
    return answer.outcome === 'stopping' ? answer.report : Promise.resolve(null);
  }

  /**
   * Stop as `stop` does, and say what became of it (`StopRequest`): `stopping` (with the report's
   * promise), `pending` (kept for `turnId` until `expiresAt`; `stop_pending` is emitted), `refused`
   * (a pending stop the book could not keep: `session_full`, `book_full` or `disabled`;
   * `stop_refused` is emitted), `already_finished` (`status`) or `not_found`, as `fleet.stop` says. Synchronous: the answer is
   * known before anything awaits. Bad options: a TypeError or RangeError naming them, nothing kept.
   *
   * @example
   * const answer = runner.requestStop('s1', { turnId: 't7', reason: StopReasons.user });
   * if (answer.outcome === 'refused') log.warn('stop not kept', answer.why);
   */
  requestStop(sessionId: string, options?: StopOptions): StopRequest {
    checkId('sessionId', sessionId);
    const { graceMs = this.graceMs, reason, turnId } = checkStopOptions(options);
    const turn = this.#active.get(sessionId);
    if (turnId === undefined || turn?.turnId === turnId) {
      if (turn === undefined) return { outcome: 'not_found', sessionId };
      if (turn.finishing) return this.#ended.finished(sessionId, turn.turnId);
      return { outcome: 'stopping', sessionId, turnId: turn.turnId, report: this.#beginStop(turn, graceMs, reason) };
    }
    const used = this.#usedBy(turnId);
    if (used === 'running') return { outcome: 'not_found', sessionId, turnId }; // another session's turn
    if (used === 'ledger' || this.#ended.statusOf(turnId) !== undefined) return this.#ended.finished(sessionId, turnId);
    const added = this.#pendingStops.add(sessionId, turnId, { reason, graceMs });
    if ('refused' in added) {
      this.#notify('stop_refused', { sessionId, turnId, reason, why: added.refused });
      return { outcome: 'refused', sessionId, turnId, reason, why: added.refused };
    }
    const kept = { sessionId, turnId, reason: added.kept.reason, graceMs: added.kept.graceMs, expiresAt: added.kept.expiresAt };
    this.#notify('stop_pending', kept);
    return { outcome: 'pending', ...kept };
  }

  /** How many stops are kept for turns that have not started (expired ones are not counted). */
  get pendingStopCount(): number { return this.#pendingStops.size; }

  /**
   * Stop every running turn with `reason` and refuse new ones (a deploy, SIGTERM): from this call on
   * `run` rejects with `ShuttingDownError`. Resolves with the stops' reports once each has emitted
   * `turn_aborted`, or at `deadlineMs` with the reports finished by then (the other stops run on
   * to their end). A second call returns the first call's promise. A turn that was already ending
   * by itself ends as it would have, and has no report here.
   *
   * @example
   * process.once('SIGTERM', async () => { await runner.shutdown(); await pool.close(); await ledger.close(); });
   */
  shutdown(options?: ShutdownOptions): Promise<StopReport[]> {
    return this.#shutdown.begin(options, (reason) => [...this.#active.values()].filter((turn) => !turn.finishing)
      .map((turn) => this.#beginStop(turn, this.graceMs, reason)));
  }

  /**
   * Answer a pending question (`turn.ask`), once; says what became of it as `fleet.answer` does
   * (`AnswerReply`: `accepted` with `node`, its fleet's `nodeId` or `'local'`; `already_answered`
   * while its turn runs; `not_found`; never `relay_unavailable`). A bad `questionId`: TypeError/RangeError.
   */
  answer(questionId: string, answer: unknown): AnswerReply {
    checkId('questionId', questionId);
    return this.#questions.answer(questionId, answer, nodeOf(this));
  }

  /** Pause every `checkpoint()` of the registry's tokens (a stop still wakes them): `registry.pause()`. */
  pause(): void { this.registry.pause(); }
  /** Undo `pause()`. */
  resume(): void { this.registry.resume(); }
  /** True between `pause()` and `resume()`. */
  get paused(): boolean { return this.registry.paused; }

  /**
   * Emit `event` to every listener. A listener that throws (or rejects) changes neither the
   * history nor the outcome, and the listeners after it still get the event; the error is
   * reported with `process.emitWarning` (type `LISTENER_WARNING`).
   */
  #notify(event: string, payload: object): void {
    // A question is told once what must know of it first does (a fleet's record: question-gates.ts);
    // every other event at once, with nothing allocated on its way (say and progress are frequent).
    if (event === 'question') {
      const question = payload as QuestionEvent;
      afterGates(this, question, () => this.#questions.isOpen(question.questionId), () => this.#tell(event, payload));
      return;
    }
    this.#tell(event, payload);
  }

  #tell(event: string, payload: object): void {
    callEach(this.rawListeners(event as TurnRunnerEventName) as Array<(payload: object) => unknown>, this, event, payload);
  }

  /** Where `turnId` is used: by a running turn, in the ledger, or `undefined` when nowhere. */
  #usedBy(turnId: string): 'running' | 'ledger' | undefined {
    if (this.#runningTurnIds.has(turnId)) return 'running';
    return this.ledger?.hasTurn(turnId) ? 'ledger' : undefined;
  }

  #refuseUsedTurnId(turnId: string): void {
    const used = this.#usedBy(turnId);
    if (used !== undefined) {
      throw new TurnIdUsedError(`TurnRunner.run: turn id ${JSON.stringify(turnId)} is already used ${used === 'running' ? 'by a running turn' : `in the ledger ${describeStore(this.ledger!)}`}; a turn id is used once`, turnId);
    }
  }

  /**
   * Record the turn's terminal status, release the turn (rule 4) and emit its event. The body's
   * outcome stands whatever the ledger does: a failed write is returned (for
   * `TurnOutcome.ledgerError`), and the event fires.
   */
  async #end(turn: ActiveTurn, entry: TurnEntryBody, event: TurnRunnerEventName, payload: object): Promise<unknown> {
    let ledgerError: unknown;
    try {
      await turn.write(entry);
    } catch (error) {
      ledgerError = error;
    }
    turn.release();
    this.#notify(event, { sessionId: turn.sessionId, turnId: turn.turnId, ...payload });
    return ledgerError;
  }

  /** `detail`: the text of a caller's signal's reason, when its abort is this stop (`StopReport.detail`). */
  #beginStop(turn: ActiveTurn, graceMs: number, reason: string, detail?: string): Promise<StopReport> {
    // 1. Already stopping → the stop under way (a repeat never resets the grace window).
    return turn.stop(() => this.#stopSequence(turn, graceMs, reason, detail));
  }

  /** docs/design.md §2, steps 2–8, in order. */
  async #stopSequence(turn: ActiveTurn, graceMs: number, reason: string, detail: string | undefined): Promise<StopReport> {
    const t0 = performance.now();
    const since = () => performance.now() - t0;
    const { sessionId, turnId, token } = turn;
    const history = new StopHistory(turn, this.ledger);

    // 2. Intent: `cancelling` is durable before any signal (a failed write is kept, not fatal).
    await history.intent(reason, detail);

    // 3. Signal: the stop's grace governs every owner of the tree; then trip the token
    //    (slots + notify wake workers, `signal` unwinds awaits, exec groups get SIGTERM).
    governStop(token);
    token.cancel(reason);
    const signalledAt = since();

    // 4. Grace: up to graceMs for the owners and the body to settle; ends as soon as they have.
    const grace = await waitForGrace(turn, graceMs);
    const settledAt = since();

    // 5. Hard stop what is left: terminate workers, kill process groups, reject questions.
    const hardStopped = await hardStopLeft(turn, grace);
    const bodyAbandoned = await isBodyAbandoned(turn, grace);
    const hardStopAt = since();

    // 6. History: aborted outputs for unfinished calls, the marker, `cancelled`; then nothing more.
    await history.abortedTurn(reason);
    const markerAt = since();

    // 7. Flush (fdatasync).
    await history.flush();
    const flushedAt = since();

    // 8. Emit; the turn is `cancelled` (a user cancel is never `error`/`failed`).
    const settledCooperatively = grace.inTime && !bodyAbandoned && hardStopped.workers + hardStopped.processGroups === 0;
    const report: StopReport = {
      sessionId, turnId, reason, ...(detail === undefined ? {} : { detail }), graceMs, settledCooperatively, bodyAbandoned,
      signalledAt, settledAt, hardStopAt, markerAt, flushedAt, emittedAt: since(), hardStopped, ledgerError: history.error,
    };
    this.#ended.add(turnId, 'cancelled');
    turn.release(); // rule 4
    this.#notify('turn_aborted', detail === undefined ? { sessionId, turnId, reason, report } : { sessionId, turnId, reason, detail, report });
    return report;
  }
}

/**
 * One running turn of a `TurnRunner`: what its body sees (`Turn`: tool, ask, say) and what a stop
 * needs to know (unfinished calls, pending questions, whether the body has settled).
 *
 * Two rules live here:
 * - Nothing of a turn starts after its stop began (`#refuseIfStopping`): from the moment `stop()`
 *   is called or the token is cancelled, `tool`/`ask`/`say` reject with `CancelledError` without
 *   running or recording anything — also while the `cancelling` intent is being fsynced, before
 *   the token is tripped.
 * - Nothing of a turn reaches the ledger or the events after its end (`write`): once the turn is
 *   `closed` (its stop reached the history step, or it ended), every later write is dropped.
 * And one pairing rule: a `tool_call` is recorded before its call can get an output, and every
 * recorded call gets exactly one `tool_output` or (from the stop) one `tool_aborted`.
 */

import { randomUUID } from 'node:crypto';
import { CancelledError, checkFunction, checkId, describe, FatalToolError } from '../errors.js';
import { runInTurn } from '../token/context.js';
import { addOwner } from '../token/owners.js';
import type { CancelToken } from '../token/token.js';
import type { LedgerStore } from '../ledger/store.js';
import type { TurnEntryBody } from '../ledger/entry.js';
import { turnWriter, type TurnWrite } from './turn-writer.js';
import { asJson } from '../base/json.js';
import { messageOf } from '../base/render.js';
import type { StopReport } from './report.js';
import type { ToolCall, ToolOptions, Turn } from './turn.js';

export type { ToolCall, ToolOptions, Turn } from './turn.js';
import { headAndTail } from '../base/head-tail.js';
import { recordable, recordableCut } from './bounded-output.js';
import { CallProgress, type ProgressPartial } from './call-progress.js';
import { facadeOf } from './facade.js';

/** What the turn needs from its runner: an object the runner makes, not the runner (not exported from a package entry). */
export interface TurnHost {
  readonly ledger: LedgerStore | undefined;
  /** The most bytes of a tool output the history records (`TurnRunnerOptions.maxOutputBytes`). */
  readonly maxOutputBytes: number;
  /** Emit an event to every listener; a throwing listener changes nothing here. */
  notify(event: string, payload: object): void;
  addQuestion(questionId: string, question: PendingQuestion): void;
  removeQuestion(questionId: string): void;
}

/** A question a turn asked and has not had answered (not exported from the package entry). */
export interface PendingQuestion {
  /** The turn that asked it. */
  readonly turnId: string;
  /** Settle the question with `answer`; false (nothing changes) once its turn is stopping or over. */
  resolve(answer: unknown): boolean;
  reject(error: unknown): void;
}

interface Call {
  readonly name: string;
  /** performance.now() when `tool_call` was recorded. */
  readonly recordedAt: number;
  /** Its output is recorded (or will not be: the ledger failed); the stop writes nothing for it. */
  finished: boolean;
  /** What the call returned or threw after the stop's signal (it is aborted all the same); `undefined` before. */
  partial: CutPartial | undefined;
  /** Its `call.progress` so far; `undefined` until it reports any, and again once it is finished. */
  progress: CallProgress | undefined;
  /** Its function settled: later progress is dropped. */
  ended: boolean;
}

/** What a call returned (or threw) after the signal, as its `partial`; `omittedBytes` as `ProgressPartial`'s. */
type CutPartial = { output: unknown; success: boolean; omittedBytes?: number };

/** How the body ended (not exported from a package entry). */
export type BodyEnd<T> = { ok: true; value: T } | { ok: false; error: unknown };

const RESOLVED = Promise.resolve();

/** `value instanceof type`, false instead of a throw (a Proxy's getPrototypeOf trap may throw). */
function isA(value: unknown, type: abstract new (...args: never[]) => unknown): boolean {
  try {
    return value instanceof type;
  } catch {
    return false;
  }
}

/**
 * A running turn as the runner sees it (not exported from a package entry). The body is given
 * `facade`, never this object, so its members are not reachable from a caller.
 */
export class ActiveTurn implements Turn {
  readonly sessionId: string;
  readonly turnId: string;
  readonly token: CancelToken;
  readonly calls = new Map<string, Call>();
  /** Set once the turn's body settled and the runner is writing its end: a stop then returns null. */
  finishing = false;
  /** No more writes of this turn reach the ledger or the events. */
  closed = false;
  /** Resolves when a stop starts (`run` races it against the body). */
  readonly stopStarted: Promise<void>;
  #startStopped!: () => void;
  /** The stop under way; `undefined` until a stop starts. */
  #stopping: Promise<StopReport> | undefined;
  /** Set as a stop begins, before its first line runs (`#stopping` is assigned only once it returns). */
  #stopBegan = false;
  /** Resolves once the body has settled, or at once if it never started; never rejects. */
  readonly bodySettled: Promise<void>;
  #bodyDone!: () => void;
  /** True once the body has settled (or was never started). */
  bodyOver = false;
  /** The first `FatalToolError` a tool threw; `undefined` if none (the body may have caught it). */
  fatal: FatalToolError | undefined;
  readonly #host: TurnHost;
  /** Appends one entry of this turn to the runner's store; `undefined` without one. */
  readonly #append: TurnWrite | undefined;
  #callSeq = 0;
  /** Frees the session for its next turn (`release`); `undefined` once run, or before the runner set it. */
  #release: (() => void) | undefined;

  /** What the body is given: `Turn`'s members only, so none of this class's is reachable from it. */
  readonly facade: Turn;

  constructor(host: TurnHost, sessionId: string, turnId: string, token: CancelToken) {
    this.#host = host;
    this.sessionId = sessionId;
    this.turnId = turnId;
    this.#append = turnWriter(host.ledger, sessionId, turnId);
    this.token = token;
    this.stopStarted = new Promise((resolve) => { this.#startStopped = resolve; });
    this.bodySettled = new Promise((resolve) => { this.#bodyDone = resolve; });
    this.facade = facadeOf(this);
  }

  get signal(): AbortSignal { return this.token.signal; }

  /** What `release()` runs: the runner's clean-up that frees the session. */
  onRelease(release: () => void): void { this.#release = release; }

  /**
   * Free the session (the runner forgets the turn, the token is retired) before the turn's
   * terminal event, so a listener of it can start the session's next turn. Runs once.
   */
  release(): void {
    const release = this.#release;
    this.#release = undefined;
    release?.();
  }

  get stopping(): Promise<StopReport> | undefined { return this.#stopping; }

  /** The stop of this turn: the one under way, else `sequence()` started now (a stop runs once). */
  stop(sequence: () => Promise<StopReport>): Promise<StopReport> {
    if (!this.#stopBegan) {
      this.#stopBegan = true;
      this.#stopping = sequence();
      this.#startStopped();
    }
    return this.#stopping!;
  }

  /**
   * Run the body unless a stop began first; resolves with how it ended (never rejects: a throw of
   * any value, `undefined` included, is `{ ok: false }`).
   */
  runBody<T>(body: () => Promise<T>): Promise<BodyEnd<T>> | undefined {
    if (this.#stopBegan) {
      this.#settleBody();
      return undefined;
    }
    const ended = new Promise<T>((resolve) => resolve(body())).then(
      (value): BodyEnd<T> => ({ ok: true, value }),
      (error: unknown): BodyEnd<T> => ({ ok: false, error }),
    );
    void ended.then(() => this.#settleBody());
    return ended;
  }

  #settleBody(): void {
    this.bodyOver = true;
    this.#bodyDone();
  }

  /**
   * Append and emit unless the turn is closed; resolves once the entry is written. The append is
   * queued synchronously, before the first await, so callers can order it against other writes.
   */
  write(entry: TurnEntryBody, event?: string, payload: object = entry): Promise<void> {
    if (this.closed) return RESOLVED;
    const appended = this.#append?.(entry);
    // No event: the append's own promise (a stop writes four entries a turn; no frame of its own for each).
    if (event === undefined) return appended ?? RESOLVED;
    return this.#announce(appended, event, payload);
  }

  async #announce(appended: Promise<void> | undefined, event: string, payload: object): Promise<void> {
    await appended;
    if (!this.closed) this.#host.notify(event, { sessionId: this.sessionId, turnId: this.turnId, ...payload });
  }

  /** True from the moment a stop began (or the token was cancelled or retired) until forever. */
  get refusing(): boolean {
    return this.#stopBegan || this.closed || this.token.isCancelled() || this.token.retired;
  }

  #refuseIfStopping(what: string): void {
    if (!this.refusing) return;
    throw new CancelledError(`${what} refused: turn ${this.turnId} of session ${this.sessionId} is stopping or over`, {
      reason: this.token.reason, sessionId: this.sessionId, turnId: this.turnId,
    });
  }

  async tool<R>(name: string, args: unknown, fn: (token: CancelToken, call: ToolCall) => Promise<R>, options?: ToolOptions): Promise<R> {
    checkId('name', name);
    checkFunction('fn', fn);
    const given = this.#givenCallId(options);
    this.#refuseIfStopping(`tool ${JSON.stringify(name)}`);
    const recordedArgs = asJson('args', args);
    const callId = given ?? this.#nextCallId();
    const call: Call = { name, recordedAt: performance.now(), finished: false, partial: undefined, progress: undefined, ended: false };
    this.calls.set(callId, call);
    try {
      await this.write({ type: 'tool_call', callId, name, args: recordedArgs }, 'tool_call', { callId, name, args: recordedArgs });
    } catch (error) {
      // Not recorded (the ledger failed): no output may follow it, so the stop must not write one.
      call.finished = true;
      throw error;
    }
    // A stop that began while `tool_call` was written: fn never runs; the stop records the call aborted.
    this.#refuseIfStopping(`tool ${JSON.stringify(name)}`);
    const child = this.token.child();
    let settle!: () => void;
    // A call whose fn never settles is abandoned with its turn: it stops counting at retire.
    const dispose = addOwner(child, {
      kind: 'call', settled: new Promise<void>((r) => { settle = r; }), hardStop() {}, onRetire: () => { settle(); dispose(); },
    });
    let end: BodyEnd<R>;
    try {
      end = { ok: true, value: await runInTurn(child, () => fn(child, this.#toolCall(callId, name, call))) };
    } catch (error) {
      end = { ok: false, error };
    }
    call.ended = true;
    try {
      // The output is queued before the call settles, so a stop that ends its grace on this
      // settlement finds the call finished and its output already ahead of the marker.
      const recorded = this.#recordOutcome(callId, name, call, end);
      end = recorded.end;
      settle();
      await recorded.written;
    } finally {
      settle();
      dispose();
      child.retire();
    }
    if (!end.ok) throw end.error;
    return end.value;
  }

  /** The `ToolCall` a tool's function gets: its ids, and `progress` (dropped once the call ended or the stop began). */
  #toolCall(callId: string, name: string, call: Call): ToolCall {
    const progress = (data: unknown): void => {
      if (call.ended || this.refusing) return;
      (call.progress ??= new CallProgress()).add(data);
      this.#host.notify('tool_progress', { sessionId: this.sessionId, turnId: this.turnId, callId, name, data });
    };
    return Object.freeze({ callId, name, progress });
  }

  /**
   * What a stop records as the cut call's `partial`: what it returned after the signal; else its
   * progress so far; else what it threw after the signal; `undefined` when there is none of these
   * (a return JSON cannot hold, such as `undefined`, counts as none: recorded, it would read back
   * as `{ success: true }` with no output).
   */
  partialOf(callId: string): CutPartial | ProgressPartial | undefined {
    const call = this.calls.get(callId);
    if (call === undefined) return undefined;
    if (call.partial?.success === true) return call.partial;
    return call.progress?.partial(this.#host.maxOutputBytes) ?? call.partial;
  }

  /** `options.callId`, checked: a TypeError naming it for a bad or repeated one. */
  #givenCallId(options: ToolOptions | undefined): string | undefined {
    if (options === undefined) return undefined;
    if (options === null || typeof options !== 'object') throw new TypeError(`options: expected an object, got ${describe(options)}`);
    const { callId } = options;
    if (callId === undefined) return undefined;
    checkId('options.callId', callId);
    if (this.calls.has(callId)) {
      throw new TypeError(`options.callId: ${JSON.stringify(callId)} is already a call of turn ${this.turnId}; a call id is unique within its turn`);
    }
    return callId;
  }

  /** The next `call-N` that no call of the turn has (a caller may have given one such id). */
  #nextCallId(): string {
    let callId: string;
    do callId = `call-${++this.#callSeq}`; while (this.calls.has(callId));
    return callId;
  }

  /**
   * Queue the call's output (synchronously) and resolve once it is written. The turn's token is
   * looked at once, now: a call that settles after the stop's signal went out (the token of the
   * turn is cancelled) stays unfinished, whatever it returned, and the stop records it aborted with
   * this as `partial`; a cancel of this call alone (its own timeout) is an ordinary failed output.
   */
  #recordOutcome<R>(callId: string, name: string, call: Call, end: BodyEnd<R>): { written: Promise<void>; end: BodyEnd<R> } {
    if (this.token.isCancelled()) {
      call.partial = partialOf(name, end, this.#host.maxOutputBytes);
      return { written: Promise.resolve(), end };
    }
    call.finished = true;
    // Only a stop reads progress, and only of an unfinished call: let it go (a turn may make many calls).
    call.progress = undefined;
    let output: unknown;
    if (end.ok) {
      try {
        output = recordable(`tool ${JSON.stringify(name)}: its value`, end.value, this.#host.maxOutputBytes);
      } catch (error) {
        end = { ok: false, error };
        output = (error as Error).message;
      }
    } else {
      if (isA(end.error, FatalToolError)) this.fatal ??= end.error as FatalToolError;
      output = headAndTail(messageOf(end.error), this.#host.maxOutputBytes);
    }
    const success = end.ok;
    const written = this.write({ type: 'tool_output', callId, output, success }, 'tool_output', {
      callId, name, output: end.ok ? end.value : output, success,
    });
    return { written, end };
  }

  ask(question: unknown): Promise<unknown> {
    try {
      this.#refuseIfStopping('ask');
    } catch (error) {
      return Promise.reject(error);
    }
    const questionId = `q-${randomUUID()}`;
    return new Promise((resolve, reject) => {
      let settle!: () => void;
      const settled = new Promise<void>((r) => { settle = r; });
      const done = () => { settle(); dispose(); this.#host.removeQuestion(questionId); };
      const pending: PendingQuestion = {
        turnId: this.turnId,
        // Once a stop has begun the stop wins: the answer is refused and the hard stop rejects the ask.
        resolve: (answer) => {
          if (this.refusing) return false;
          done();
          resolve(answer);
          return true;
        },
        reject: (error) => { done(); reject(error); },
      };
      const dispose = addOwner(this.token, {
        kind: 'question',
        settled,
        hardStop: () => pending.reject(new CancelledError(`question ${questionId} was cancelled by a stop`, {
          reason: this.token.reason, sessionId: this.sessionId, turnId: this.turnId, hard: true,
        })),
        // The body ended without waiting for its answer: the question is withdrawn (runner.answer now
        // says not_found). It is not rejected: nobody may be listening, and an unhandled rejection
        // would take the host down.
        onRetire: done,
      });
      this.#host.addQuestion(questionId, pending);
      this.#host.notify('question', { sessionId: this.sessionId, turnId: this.turnId, questionId, question });
    });
  }

  async say(text: string): Promise<void> {
    if (typeof text !== 'string') throw new TypeError(`text: expected a string, got ${describe(text)}`);
    this.#refuseIfStopping('say');
    await this.write({ type: 'say', text }, 'say');
  }
}

/**
 * What a call returned or threw after the signal, as the history keeps it (`partial`); `undefined`
 * for a return of nothing JSON can hold (`undefined`, a function): no output to keep.
 */
function partialOf<R>(name: string, end: BodyEnd<R>, maxBytes: number): CutPartial | undefined {
  if (!end.ok) return { output: headAndTail(messageOf(end.error), maxBytes), success: false };
  try {
    const { value, omittedBytes } = recordableCut(`tool ${JSON.stringify(name)}: its value`, end.value, maxBytes);
    if (value === undefined) return undefined;
    return omittedBytes === 0 ? { output: value, success: true } : { output: value, success: true, omittedBytes };
  } catch (error) {
    return { output: messageOf(error), success: false };
  }
}

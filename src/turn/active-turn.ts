/**
 * One running turn of a `TurnRunner`: what its body sees (`Turn`: tool, ask, say) and what a stop
 * needs to know (unfinished calls, pending questions).
 *
 * The rule that keeps an abandoned body out of history lives here, in `#write`: once the turn is
 * `closed` (its stop reached the history step, or it ended), every later write is dropped, so
 * nothing of a turn reaches the ledger or the events after its terminal entry.
 */

import { randomUUID } from 'node:crypto';
import { CancelledError, checkFunction, checkId, FatalToolError, ToolError } from '../errors.js';
import { runInTurn } from '../token/context.js';
import { addOwner } from '../token/owners.js';
import type { CancelToken } from '../token/token.js';
import type { Ledger, LedgerEntryInput } from './ledger.js';
import type { StopReport } from './report.js';

/** What a turn's body gets. */
export interface Turn {
  readonly token: CancelToken;
  readonly signal: AbortSignal;
  readonly turnId: string;
  /**
   * Run a tool call: `tool_call` is written before `fn` runs with a child token (a tool timeout
   * cancels only that call). A value → `tool_output` success. A `ToolError` (or any other error)
   * → `tool_output` with `success: false` and the message; the call rejects, the turn goes on.
   * A `FatalToolError` ends the turn `failed`. A stop → the call gets an aborted output.
   */
  tool<R>(name: string, args: unknown, fn: (token: CancelToken) => Promise<R>): Promise<R>;
  /**
   * Emit `question`; resolves with `runner.answer(questionId, value)`; rejects with `CancelledError`
   * on a stop. A question still pending when its turn ends otherwise is withdrawn and never settles.
   */
  ask(question: unknown): Promise<unknown>;
  /** Streamed output: a `say` entry, kept on a stop. */
  say(text: string): Promise<void>;
}

/** What the turn needs from its runner. */
export interface TurnHost {
  readonly ledger: Ledger | undefined;
  emit(event: string, payload: object): void;
  addQuestion(questionId: string, question: PendingQuestion): void;
  removeQuestion(questionId: string): void;
}

export interface PendingQuestion {
  resolve(answer: unknown): void;
  reject(error: unknown): void;
}

/** A ledger entry without the fields the turn fills in. */
export type EntryBody = LedgerEntryInput extends infer E ? (E extends unknown ? Omit<E, 'sessionId' | 'turnId'> : never) : never;

interface Call {
  readonly name: string;
  /** performance.now() when `tool_call` was recorded. */
  readonly recordedAt: number;
  finished: boolean;
}

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
  /** The first `FatalToolError` a tool threw; `undefined` if none (the body may have caught it). */
  fatal: FatalToolError | undefined;
  readonly #host: TurnHost;
  #callSeq = 0;

  constructor(host: TurnHost, sessionId: string, turnId: string, token: CancelToken) {
    this.#host = host;
    this.sessionId = sessionId;
    this.turnId = turnId;
    this.token = token;
    this.stopStarted = new Promise((resolve) => { this.#startStopped = resolve; });
  }

  get signal(): AbortSignal { return this.token.signal; }

  get stopping(): Promise<StopReport> | undefined { return this.#stopping; }

  /** The stop of this turn: the one under way, else `sequence()` started now (a stop runs once). */
  stop(sequence: () => Promise<StopReport>): Promise<StopReport> {
    if (this.#stopping === undefined) {
      this.#stopping = sequence();
      this.#startStopped();
    }
    return this.#stopping;
  }

  /** Append and emit unless the turn is closed; resolves once the entry is written. */
  async write(entry: EntryBody, event?: string, payload: object = entry): Promise<void> {
    if (this.closed) return;
    await this.#host.ledger?.append({ ...entry, sessionId: this.sessionId, turnId: this.turnId } as LedgerEntryInput);
    if (event !== undefined && !this.closed) this.#host.emit(event, { sessionId: this.sessionId, turnId: this.turnId, ...payload });
  }

  #refuseIfOver(what: string): void {
    if (this.closed || this.token.isCancelled() || this.token.retired) {
      throw new CancelledError(`${what} refused: turn ${this.turnId} of session ${this.sessionId} is stopping or over`, {
        reason: this.token.reason, sessionId: this.sessionId, turnId: this.turnId,
      });
    }
  }

  async tool<R>(name: string, args: unknown, fn: (token: CancelToken) => Promise<R>): Promise<R> {
    checkId('name', name);
    checkFunction('fn', fn);
    this.#refuseIfOver(`tool ${JSON.stringify(name)}`);
    const callId = `call-${++this.#callSeq}`;
    const call: Call = { name, recordedAt: performance.now(), finished: false };
    this.calls.set(callId, call);
    await this.write({ type: 'tool_call', callId, name, args });
    this.#refuseIfOver(`tool ${JSON.stringify(name)}`);
    const child = this.token.child();
    let settle!: () => void;
    // A call whose fn never settles is abandoned with its turn: it stops counting at retire.
    const dispose = addOwner(child, {
      kind: 'call', settled: new Promise<void>((r) => { settle = r; }), hardStop() {}, onRetire: () => { settle(); dispose(); },
    });
    try {
      const value = await runInTurn(child, () => fn(child));
      call.finished = true;
      await this.write({ type: 'tool_output', callId, output: value, success: true }, 'tool_output', { callId, name, output: value, success: true });
      return value;
    } catch (error) {
      // A stop of the turn leaves the call unfinished: the stop writes its aborted output. A cancel
      // of this call alone (its own timeout) is an ordinary failed output, and the turn goes on.
      if (this.token.isCancelled() && !(error instanceof ToolError)) throw error;
      call.finished = true;
      if (error instanceof FatalToolError) this.fatal ??= error;
      const output = error instanceof Error ? error.message : String(error);
      await this.write({ type: 'tool_output', callId, output, success: false }, 'tool_output', { callId, name, output, success: false });
      throw error;
    } finally {
      settle();
      dispose();
      child.retire();
    }
  }

  ask(question: unknown): Promise<unknown> {
    try {
      this.#refuseIfOver('ask');
    } catch (error) {
      return Promise.reject(error);
    }
    const questionId = `q-${randomUUID()}`;
    return new Promise((resolve, reject) => {
      let settle!: () => void;
      const settled = new Promise<void>((r) => { settle = r; });
      const done = () => { settle(); dispose(); this.#host.removeQuestion(questionId); };
      const pending: PendingQuestion = {
        resolve: (answer) => { done(); resolve(answer); },
        reject: (error) => { done(); reject(error); },
      };
      const dispose = addOwner(this.token, {
        kind: 'question',
        settled,
        hardStop: () => pending.reject(new CancelledError(`question ${questionId} was cancelled by a stop`, {
          reason: this.token.reason, sessionId: this.sessionId, turnId: this.turnId, hard: true,
        })),
        // The body ended without waiting for its answer: the question is withdrawn (answer() now
        // returns false). It is not rejected: nobody may be listening, and an unhandled rejection
        // would take the host down.
        onRetire: done,
      });
      this.#host.addQuestion(questionId, pending);
      this.#host.emit('question', { sessionId: this.sessionId, turnId: this.turnId, questionId, question });
    });
  }

  async say(text: string): Promise<void> {
    if (typeof text !== 'string') throw new TypeError(`text: expected a string, got ${typeof text}`);
    await this.write({ type: 'say', text }, 'say');
  }
}

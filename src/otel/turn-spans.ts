/**
 * The spans of a runner's turns: one `invoke_agent` span a turn, and one `execute_tool <name>` span
 * a tool call, the child of its turn's span. It owns the open spans; the listeners in
 * `instrument.ts` tell it what happened.
 *
 * Rules kept here:
 * 1. A tool span's parent is its turn's span, given explicitly (`trace.setSpan`), never the active
 *    context: the runner emits `tool_call` from inside the body, where the active context is
 *    whatever the body's own code made it.
 * 2. Every span this module opens is ended: a tool span at its `tool_output`, or with its turn
 *    (a stopped turn's unfinished calls, a call abandoned by its turn), and every open span at
 *    `endAll()` (`off()`).
 * 3. Only a `failed` turn (and a failed tool call) gets status ERROR; a stop is not an error.
 * 4. Nothing of a turn's content is recorded unless `recordErrors`: then a failed call's error text
 *    and a failed turn's message and exception (with its stack), which may quote content.
 * 5. A turn's span ends inside its terminal event (`turn_completed`, `turn_failed`,
 *    `turn_aborted`), which the runner emits before `run()` settles: `await runner.run(...)` then
 *    `forceFlush()` exports it, with its status. The spans still waiting (rule 6) end first, so
 *    every span of the turn has ended by then. A processor's `onEnd` runs there: a
 *    BatchSpanProcessor's only queues the span (its export runs later, off the turn's path); a
 *    SimpleSpanProcessor exports in it, so an exporter that blocks holds `run()` by that long —
 *    the caller's choice (docs/otel.md, "Limits").
 * 6. A tool span is ended (`span.end(at)`, at the moment of its `tool_output`) on the next turn of
 *    the event loop, never inside the event: an `onEnd` that blocks does not hold the tool's value
 *    from the body. `endAll()` ends what is still waiting at once.
 */

import {
  context, SpanKind, SpanStatusCode, trace, type Context, type Span, type Tracer,
} from '@opentelemetry/api';
import { messageOf, renderSafely } from '../base/render.js';
import type { StopReport } from '../turn/report.js';
import { Attr, STOP_EVENT, STOP_PHASES, StopAttr, TOOL_SPAN, TURN_SPAN } from './names.js';

interface OpenTurn {
  readonly span: Span;
  /** The turn's span as a context: the parent of its tool spans (rule 1). */
  readonly context: Context;
  /** Open tool spans by call id. */
  readonly tools: Map<string, Span>;
}

/** How a tool call ended, as `fullstop.tool.status` says it. */
export type ToolStatus = 'completed' | 'failed' | 'aborted';

export class TurnSpans {
  readonly #tracer: Tracer;
  readonly #recordErrors: boolean;
  /** Open turns by turn id (a running turn's id is unique within its runner). */
  readonly #turns = new Map<string, OpenTurn>();
  /** Tool spans to end on the next turn of the event loop, with their end times (rule 6). */
  #ending: Array<[Span, number]> = [];

  constructor(tracer: Tracer, recordErrors: boolean) {
    this.#tracer = tracer;
    this.#recordErrors = recordErrors;
  }

  /** The running turn's span as a context, to make active while its body runs; undefined for a turn not traced. */
  contextOf(turnId: string): Context | undefined {
    return this.#turns.get(turnId)?.context;
  }

  /** `turn_started`: the turn's span, a child of the context active where `run` was called. */
  started(sessionId: string, turnId: string): void {
    if (this.#turns.has(turnId)) return;
    const parent = context.active();
    const span = this.#tracer.startSpan(TURN_SPAN, {
      kind: SpanKind.INTERNAL,
      attributes: { [Attr.operation]: TURN_SPAN, [Attr.conversationId]: sessionId, [Attr.turnId]: turnId },
    }, parent);
    this.#turns.set(turnId, { span, context: trace.setSpan(parent, span), tools: new Map() });
  }

  /** `tool_call`: the call's span, a child of its turn's span (rule 1). */
  toolCall(turnId: string, callId: string, name: string): void {
    const turn = this.#turns.get(turnId);
    if (turn === undefined || turn.tools.has(callId)) return;
    const span = this.#tracer.startSpan(`${TOOL_SPAN} ${name}`, {
      kind: SpanKind.INTERNAL,
      attributes: { [Attr.operation]: TOOL_SPAN, [Attr.toolName]: name, [Attr.toolCallId]: callId },
    }, turn.context);
    turn.tools.set(callId, span);
  }

  /** `tool_output`: the call's span ends; a failed call's with status ERROR and its message. */
  toolOutput(turnId: string, callId: string, success: boolean, output: unknown): void {
    const turn = this.#turns.get(turnId);
    const span = turn?.tools.get(callId);
    if (span === undefined) return;
    turn!.tools.delete(callId);
    this.#endTool(span, success ? 'completed' : 'failed', success || !this.#recordErrors ? undefined : renderSafely(output));
  }

  /** `turn_completed`. */
  completed(turnId: string): void {
    this.#end(turnId, 'completed', () => {});
  }

  /** `turn_failed`: status ERROR with the error's message, and the error recorded as an exception. */
  failed(turnId: string, error: unknown): void {
    this.#end(turnId, 'failed', (span) => {
      span.setStatus(this.#recordErrors ? { code: SpanStatusCode.ERROR, message: messageOf(error) } : { code: SpanStatusCode.ERROR });
      const type = errorName(error);
      span.setAttribute(Attr.errorType, type ?? '_OTHER');
      if (type !== undefined && this.#recordErrors) span.recordException(error as Error);
    });
  }

  /**
   * `turn_aborted`: the `fullstop.stop` event, timed at the stop request, with the report's reason,
   * grace and phase times; the status stays UNSET (rule 3).
   */
  aborted(turnId: string, report: StopReport): void {
    this.#end(turnId, 'cancelled', (span) => {
      const attributes: Record<string, string | number | boolean> = {
        [StopAttr.reason]: report.reason,
        [StopAttr.graceMs]: report.graceMs,
        [StopAttr.settledCooperatively]: report.settledCooperatively,
      };
      if (report.detail !== undefined) attributes[StopAttr.detail] = report.detail;
      for (const [phase, field] of STOP_PHASES) {
        if (Number.isFinite(report[field])) attributes[`fullstop.stop.${phase}_ms`] = report[field];
      }
      // A performance.now() time, which the SDK maps onto the span's own clock (as its start and end).
      span.addEvent(STOP_EVENT, attributes, performance.now() - report.emittedAt);
    });
  }

  /** `off()`: end every span waiting to end (rule 6), and every open span as it stands (rule 2); no status is guessed for them. */
  endAll(): void {
    this.#flush();
    for (const turn of this.#turns.values()) {
      for (const span of turn.tools.values()) span.end();
      turn.span.end();
    }
    this.#turns.clear();
  }

  /** End `span` at this moment, on the next turn of the event loop (rule 6). */
  #endLater(span: Span): void {
    this.#ending.push([span, performance.now()]);
    if (this.#ending.length === 1) setImmediate(() => this.#flush());
  }

  #flush(): void {
    const ending = this.#ending;
    this.#ending = [];
    for (const [span, at] of ending) {
      try {
        span.end(at); // a performance.now() time, which the SDK maps onto the span's own clock
      } catch {
        // A processor's onEnd that throws is its own fault; the other spans still end.
      }
    }
  }

  /** End a turn's span with its status, now (rule 5), and first the spans of its calls still open (rule 2). */
  #end(turnId: string, status: 'completed' | 'failed' | 'cancelled', mark: (span: Span) => void): void {
    const turn = this.#turns.get(turnId);
    if (turn === undefined) return;
    this.#turns.delete(turnId);
    // A stopped turn's open calls are the ones the stop recorded `tool_aborted`; a finished turn's
    // are calls its body did not wait for, abandoned with it.
    for (const span of turn.tools.values()) this.#endTool(span, 'aborted', undefined);
    turn.span.setAttribute(Attr.turnStatus, status);
    try {
      mark(turn.span);
    } finally {
      // Rule 2, even if a hostile error made recording it throw; rule 5: its tool spans first.
      this.#flush();
      try {
        turn.span.end();
      } catch {
        // A processor's onEnd that throws is its own fault; the turn still ends.
      }
    }
  }

  #endTool(span: Span, status: ToolStatus, errorMessage: string | undefined): void {
    span.setAttribute(Attr.toolStatus, status);
    if (status === 'failed') {
      span.setStatus(errorMessage === undefined ? { code: SpanStatusCode.ERROR } : { code: SpanStatusCode.ERROR, message: errorMessage });
      span.setAttribute(Attr.errorType, 'tool_error');
    }
    this.#endLater(span);
  }
}

/** An Error's name; `undefined` for anything else, or an Error whose name cannot be read. */
function errorName(error: unknown): string | undefined {
  try {
    return error instanceof Error && typeof error.name === 'string' ? error.name : undefined;
  } catch {
    return undefined; // a hostile Proxy: the thrown value may be anything
  }
}

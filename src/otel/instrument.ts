/**
 * `instrument(runner)`: traces and stop metrics for a `TurnRunner`, from its events alone (it
 * changes nothing of how a turn runs). What it emits is in docs/otel.md.
 */

import { context, metrics, trace, type MeterProvider, type TracerProvider } from '@opentelemetry/api';
import { describe } from '../errors.js';
import type { TurnRunner } from '../turn/runner.js';
import { runnerHooks } from '../turn/runner-hooks.js';
import type { TurnRunnerEventName, TurnRunnerEvents } from '../turn/runner-events.js';
import { SCOPE } from './names.js';
import { StopMetrics } from './stop-metrics.js';
import { TurnSpans } from './turn-spans.js';

/** Where `instrument` sends its spans and metrics. */
export interface InstrumentOptions {
  /**
   * The tracer provider of the turn and tool spans.
   * @default trace.getTracerProvider() — the global one (a no-op until an SDK registers one)
   */
  tracerProvider?: TracerProvider;
  /**
   * The meter provider of `fullstop.stop.duration` and `fullstop.stop.hard`.
   * @default metrics.getMeterProvider() — the global one (a no-op until an SDK registers one)
   */
  meterProvider?: MeterProvider;
  /**
   * Record error texts: a failed tool call's error as its span's status message, and a failed
   * turn's message and exception (type, message, stack). They may quote a turn's content
   * (arguments, outputs, user text), so they are left out unless asked for.
   * @default false — failed spans carry status ERROR and `error.type` only
   */
  recordErrors?: boolean;
}

/**
 * Trace `runner`'s turns and measure its stops with OpenTelemetry, until the returned `off()`.
 *
 * - A span `invoke_agent` a turn (`gen_ai.conversation.id` = the session id, `fullstop.turn.id`,
 *   `fullstop.turn.status`), a child of the context active where `run` was called, and the active
 *   span while the turn's body runs (spans the body starts are its children); status ERROR only
 *   for a `failed` turn (its message and exception only with `recordErrors`). A stopped turn's span has the event `fullstop.stop` (reason, grace
 *   and the report's phase times, `fullstop.stop.<phase>_ms`).
 * - A span `execute_tool <name>` a tool call (`gen_ai.tool.name`, `gen_ai.tool.call.id`), a child
 *   of its turn's span; a call the stop cut is ended with its turn, `fullstop.tool.status: aborted`.
 * - Histogram `fullstop.stop.duration` (ms, request → `turn_aborted`, by `fullstop.stop.reason`)
 *   and counter `fullstop.stop.hard` (by `fullstop.hard.kind`: worker | process_group | question).
 *
 * A turn's span (and its tool spans) has ended before `run()` settles, so `await runner.run(...)`
 * then `forceFlush()` exports it; a processor's `onEnd` runs on that path (a BatchSpanProcessor's
 * only queues the span; a SimpleSpanProcessor's exports, and holds `run()` while it does).
 *
 * `off()` removes every listener `instrument` added and ends the spans still open; a second call
 * does nothing. Throws a TypeError naming the argument for a bad `runner` or provider.
 *
 * @example
 * import { instrument } from 'fullstop/otel';
 * const off = instrument(runner); // the global providers, e.g. set up by @opentelemetry/sdk-node
 * process.on('SIGTERM', async () => { await runner.shutdown(); off(); });
 */
export function instrument(runner: TurnRunner, options: InstrumentOptions = {}): () => void {
  if (typeof runner?.on !== 'function' || typeof runner.removeListener !== 'function') {
    throw new TypeError(`runner: expected a TurnRunner, got ${describe(runner)}`);
  }
  if (typeof options !== 'object' || options === null) {
    throw new TypeError(`options: expected an object, got ${describe(options)}`);
  }
  const { tracerProvider = trace.getTracerProvider(), meterProvider = metrics.getMeterProvider() } = options;
  if (typeof tracerProvider?.getTracer !== 'function') {
    throw new TypeError(`options.tracerProvider: expected a TracerProvider, got ${describe(tracerProvider)}`);
  }
  if (typeof meterProvider?.getMeter !== 'function') {
    throw new TypeError(`options.meterProvider: expected a MeterProvider, got ${describe(meterProvider)}`);
  }

  const { recordErrors = false } = options;
  if (typeof recordErrors !== 'boolean') throw new TypeError(`options.recordErrors: expected a boolean, got ${describe(recordErrors)}`);

  const spans = new TurnSpans(tracerProvider.getTracer(SCOPE), recordErrors);
  const stops = new StopMetrics(meterProvider.getMeter(SCOPE));
  const removers: Array<() => void> = [];
  const listen = <K extends TurnRunnerEventName>(event: K, listener: (...payload: TurnRunnerEvents[K]) => void) => {
    // The call sites are checked against the event map; TypeScript cannot resolve Node's
    // listener type for a generic K, which is that same type once K is known.
    const added = listener as Parameters<TurnRunner['on']>[1];
    runner.on(event, added);
    removers.push(() => runner.removeListener(event, added));
  };
  listen('turn_started', (e) => spans.started(e.sessionId, e.turnId));
  listen('tool_call', (e) => spans.toolCall(e.turnId, e.callId, e.name));
  listen('tool_output', (e) => spans.toolOutput(e.turnId, e.callId, e.success, e.output));
  listen('turn_completed', (e) => spans.completed(e.turnId));
  listen('turn_failed', (e) => spans.failed(e.turnId, e.error));
  listen('turn_aborted', (e) => {
    spans.aborted(e.turnId, e.report);
    stops.record(e.report);
  });

  // The turn's span is the active context while its body runs, so the spans the body starts
  // (a model call, fetch) are its children. A runner of another copy of the library (no hooks) is
  // traced all the same, without that context.
  const scopes = runnerHooks(runner)?.bodyScopes;
  const scope = (turnId: string, run: () => Promise<unknown>) => {
    const active = spans.contextOf(turnId);
    return active === undefined ? run() : context.with(active, run);
  };
  scopes?.add(scope);
  removers.push(() => scopes?.delete(scope));

  let on = true;
  return function off(): void {
    if (!on) return;
    on = false;
    for (const remove of removers) remove();
    spans.endAll();
  };
}

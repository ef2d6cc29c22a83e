/**
 * `instrument(runner)`: traces and stop metrics for a `TurnRunner`, from its events alone (it
 * changes nothing of how a turn runs). What it emits is in docs/otel.md.
 */

import { metrics, trace, type MeterProvider, type TracerProvider } from '@opentelemetry/api';
import { describe } from '../errors.js';
import type { StopReport } from '../turn/report.js';
import type { TurnRunner } from '../turn/runner.js';
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
}

interface TurnEvent { sessionId: string; turnId: string }
interface ToolCallEvent extends TurnEvent { callId: string; name: string }
interface ToolOutputEvent extends ToolCallEvent { success: boolean; output: unknown }
interface TurnFailedEvent extends TurnEvent { error: unknown }
interface TurnAbortedEvent extends TurnEvent { report?: StopReport }

/**
 * Trace `runner`'s turns and measure its stops with OpenTelemetry, until the returned `off()`.
 *
 * - A span `invoke_agent` a turn (`gen_ai.conversation.id` = the session id, `fullstop.turn.id`,
 *   `fullstop.turn.status`), a child of the context active where `run` was called; status ERROR
 *   only for a `failed` turn. A stopped turn's span has the event `fullstop.stop` (reason, grace
 *   and the report's phase times, `fullstop.stop.<phase>_ms`).
 * - A span `execute_tool <name>` a tool call (`gen_ai.tool.name`, `gen_ai.tool.call.id`), a child
 *   of its turn's span; a call the stop cut is ended with its turn, `fullstop.tool.status: aborted`.
 * - Histogram `fullstop.stop.duration` (ms, request → `turn_aborted`, by `fullstop.stop.reason`)
 *   and counter `fullstop.stop.hard` (by `fullstop.hard.kind`: worker | process_group | question).
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

  const spans = new TurnSpans(tracerProvider.getTracer(SCOPE));
  const stops = new StopMetrics(meterProvider.getMeter(SCOPE));
  // The runner's events, each with the payload docs/runner.md gives it.
  const listeners: ReadonlyArray<readonly [string, (...payload: any[]) => void]> = [
    ['turn_started', (e: TurnEvent) => spans.started(e.sessionId, e.turnId)],
    ['tool_call', (e: ToolCallEvent) => spans.toolCall(e.turnId, e.callId, e.name)],
    ['tool_output', (e: ToolOutputEvent) => spans.toolOutput(e.turnId, e.callId, e.success, e.output)],
    ['turn_completed', (e: TurnEvent) => spans.completed(e.turnId)],
    ['turn_failed', (e: TurnFailedEvent) => spans.failed(e.turnId, e.error)],
    ['turn_aborted', (e: TurnAbortedEvent) => {
      spans.aborted(e.turnId, e.report);
      if (e.report !== undefined) stops.record(e.report);
    }],
  ];
  for (const [event, listener] of listeners) runner.on(event, listener);

  let on = true;
  return function off(): void {
    if (!on) return;
    on = false;
    for (const [event, listener] of listeners) runner.removeListener(event, listener);
    spans.endAll();
  };
}

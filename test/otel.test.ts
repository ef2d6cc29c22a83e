/**
 * fullstop/otel: a real TurnRunner with a real ledger, pool worker and process group, traced and
 * measured into the OpenTelemetry SDK's own in-memory exporters; what they hold is what an OTLP
 * exporter would have sent.
 */
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { context, metrics, ROOT_CONTEXT, SpanStatusCode, trace, type HrTime } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  BasicTracerProvider, BatchSpanProcessor, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan, type SpanExporter,
} from '@opentelemetry/sdk-trace-base';
import {
  AggregationTemporality, InMemoryMetricExporter, MeterProvider, PeriodicExportingMetricReader, type MetricData,
} from '@opentelemetry/sdk-metrics';
import { exec, Ledger, ToolError, TurnPool, TurnRegistry, TurnRunner, type LedgerEntry } from '../dist/src/index.js';
import { instrument } from '../dist/src/otel/index.js';
import { flags, started } from './support/handshake.js';
import { eventually, toolTree } from './support/leaks.js';

const EVENTS = ['turn_started', 'tool_call', 'tool_output', 'turn_completed', 'turn_failed', 'turn_aborted'];
const tasks = new URL('./fixtures/pool/tasks.mjs', import.meta.url).href;
const registry = new TurnRegistry();
const pool = new TurnPool({ filename: tasks, minThreads: 1, maxThreads: 2 });

let dir: string;
let ledger: Ledger;
let runner: TurnRunner;
let exported: InMemorySpanExporter;
let tracerProvider: BasicTracerProvider;
let metricExporter: InMemoryMetricExporter;
let reader: PeriodicExportingMetricReader;
let meterProvider: MeterProvider;
let off: () => void;

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'fullstop-otel-'));
  ledger = await Ledger.open(join(dir, 'history.jsonl'));
  runner = new TurnRunner({ registry, pool, ledger, graceMs: 100 });
  exported = new InMemorySpanExporter();
  tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exported)] });
  metricExporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  // Collected on demand (forceFlush); the interval never comes round during a test.
  reader = new PeriodicExportingMetricReader({ exporter: metricExporter, exportIntervalMillis: 3_600_000 });
  meterProvider = new MeterProvider({ readers: [reader] });
  off = instrument(runner, { tracerProvider, meterProvider });
});

afterEach(async () => {
  off();
  await ledger.close();
  await tracerProvider.shutdown();
  await meterProvider.shutdown();
  rmSync(dir, { recursive: true, force: true });
  expect(registry.stats()).toEqual({ liveTokens: 0, liveSlots: 0, liveBridges: 0, liveOwners: 0 });
  expect(pool.stats()).toMatchObject({ running: 0, queued: 0 });
  expect(toolTree()).toEqual([]);
});

afterAll(() => pool.destroy());

const ms = (t: HrTime) => t[0] * 1e3 + t[1] / 1e6;
/** `instrument` again, recording error texts. */
function recordingErrors(): void {
  off();
  off = instrument(runner, { tracerProvider, meterProvider, recordErrors: true });
}
const spansNamed = (name: string) => exported.getFinishedSpans().filter((s) => s.name === name);
const parentOf = (span: ReadableSpan) => span.parentSpanContext?.spanId;

function onlyTurnSpan(): ReadableSpan {
  const turns = spansNamed('invoke_agent');
  expect(turns).toHaveLength(1);
  return turns[0];
}

/**
 * How far two spans' times can disagree about one moment: the SDK anchors each span at its start on
 * `Date.now()` (whole milliseconds) and measures on from there, so a tool span ended just before its
 * turn's can read up to 1 ms later.
 */
const SPAN_CLOCK_MS = 1;

/** The tool spans, each checked to be a child of `turn` in its trace and within its time. */
function toolSpansOf(turn: ReadableSpan): ReadableSpan[] {
  const tools = exported.getFinishedSpans().filter((s) => s.name.startsWith('execute_tool '));
  for (const tool of tools) {
    expect(tool.spanContext().traceId).toBe(turn.spanContext().traceId);
    expect(parentOf(tool)).toBe(turn.spanContext().spanId);
    expect(ms(tool.startTime)).toBeGreaterThanOrEqual(ms(turn.startTime) - SPAN_CLOCK_MS);
    expect(ms(tool.endTime)).toBeLessThanOrEqual(ms(turn.endTime) + SPAN_CLOCK_MS);
  }
  return tools;
}

/** The metrics collected so far, by name (cumulative: everything since the provider began). */
async function collected(): Promise<Map<string, MetricData>> {
  await reader.forceFlush();
  const last = metricExporter.getMetrics().at(-1);
  return new Map((last?.scopeMetrics ?? []).flatMap((s) => s.metrics).map((m) => [m.descriptor.name, m]));
}

function callIdOf(name: string, entries: LedgerEntry[]): string {
  const call = entries.find((e) => e.type === 'tool_call' && (e as { name?: string }).name === name);
  return (call as { callId: string }).callId;
}

describe('a completed turn', () => {
  it('is one invoke_agent span, status unset, with an execute_tool child per call; a failed call\'s span is an error (with its text under recordErrors)', async () => {
    recordingErrors();
    const outcome = await runner.run('s-done', async (turn) => {
      const echoed = await turn.tool('echo', { value: 7 }, (token) => pool.run({ value: 7 }, { token, name: 'echo' }), { callId: 'call_model_1' });
      await turn.tool('lookup', { q: 'x' }, async () => { throw new ToolError('no such page'); }).catch(() => {});
      return (echoed as { value: number }).value;
    }, { turnId: 't-done' });
    expect(outcome).toMatchObject({ status: 'completed', value: 7 });

    const turn = onlyTurnSpan();
    expect(turn.attributes).toEqual({
      'gen_ai.operation.name': 'invoke_agent',
      'gen_ai.conversation.id': 's-done',
      'fullstop.turn.id': 't-done',
      'fullstop.turn.status': 'completed',
    });
    expect(turn.status.code).toBe(SpanStatusCode.UNSET);
    expect(turn.events).toEqual([]);
    expect(turn.ended).toBe(true);

    const entries = await ledger.entries({ turnId: 't-done' });
    const tools = toolSpansOf(turn);
    expect(tools.map((s) => s.name)).toEqual(['execute_tool echo', 'execute_tool lookup']);
    const [echo, lookup] = tools;
    expect(callIdOf('echo', entries)).toBe('call_model_1');
    expect(echo.attributes).toEqual({
      'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': 'echo', 'gen_ai.tool.call.id': 'call_model_1',
      'fullstop.tool.status': 'completed',
    });
    expect(echo.status.code).toBe(SpanStatusCode.UNSET);
    expect(lookup.attributes).toMatchObject({ 'gen_ai.tool.call.id': callIdOf('lookup', entries), 'fullstop.tool.status': 'failed', 'error.type': 'tool_error' });
    expect(lookup.status).toEqual({ code: SpanStatusCode.ERROR, message: 'no such page' });
    // The calls ran one after the other, and their spans say so.
    expect(ms(echo.endTime)).toBeLessThanOrEqual(ms(lookup.startTime));

    // No stop, no stop measurement.
    const m = await collected();
    expect(m.get('fullstop.stop.duration')?.dataPoints ?? []).toEqual([]);
    expect(m.get('fullstop.stop.hard')?.dataPoints ?? []).toEqual([]);
  });

  it('is a child of the context active where run was called; its tool spans are its children, whatever the body made active', async () => {
    const manager = new AsyncLocalStorageContextManager().enable();
    context.setGlobalContextManager(manager);
    const tracer = tracerProvider.getTracer('test');
    try {
      const request = tracer.startSpan('POST /turns');
      const model = { span: undefined as ReadableSpan | undefined };
      await context.with(trace.setSpan(ROOT_CONTEXT, request), () => runner.run('s-ctx', async (turn) => {
        const span = tracer.startSpan('model call');
        model.span = span as unknown as ReadableSpan;
        await context.with(trace.setSpan(context.active(), span), () => turn.tool('echo', { value: 1 }, (token) => pool.run({ value: 1 }, { token, name: 'echo' })));
        span.end();
      }, { turnId: 't-ctx' }));
      request.end();
      const turn = onlyTurnSpan();
      expect(turn.spanContext().traceId).toBe(request.spanContext().traceId);
      expect(parentOf(turn)).toBe(request.spanContext().spanId);
      const [tool] = toolSpansOf(turn);
      expect(parentOf(tool)).not.toBe(model.span!.spanContext().spanId);
    } finally {
      context.disable();
    }
  });
});

describe('a stopped turn', () => {
  it('has the fullstop.stop event with the report\'s reason, grace and phase times and is not an error; its cut calls end aborted; one duration and each kind hard-stopped are measured', async () => {
    const f = flags();
    const ready = join(dir, 'ready');
    let question = false;
    runner.once('question', () => { question = true; });
    const outcome$ = runner.run('s-stop', async (turn) => {
      const answer = turn.ask('go on?');
      answer.catch(() => {}); // the stop rejects it; Promise.all below reports the first rejection
      await Promise.all([
        turn.tool('crunch', { n: 1 }, (token) => pool.run({ flags: f }, { token, name: 'neverChecks' })),
        turn.tool('sh', {}, (token) => exec('sh', ['-c', `trap '' TERM; touch ${ready}; while :; do sleep 1; done`], { token })),
        answer,
      ]);
    }, { turnId: 't-stop' });
    await started(f);
    await eventually(() => existsSync(ready) && question, 5000, 'the worker task, the shell and the question');

    const asked = performance.now();
    const report = await runner.stop('s-stop', { graceMs: 50 });
    const answered = performance.now();
    const outcome = await outcome$;
    expect(outcome).toMatchObject({ status: 'cancelled', report });
    expect(report).toMatchObject({ reason: 'cancel.user', graceMs: 50, hardStopped: { workers: 1, processGroups: 1, questions: 1 } });
    const entries = await ledger.entries({ turnId: 't-stop' });
    expect(entries.filter((e) => e.type === 'tool_aborted')).toHaveLength(2);

    const turn = onlyTurnSpan();
    expect(turn.status.code).toBe(SpanStatusCode.UNSET);
    expect(turn.attributes).toMatchObject({ 'gen_ai.conversation.id': 's-stop', 'fullstop.turn.id': 't-stop', 'fullstop.turn.status': 'cancelled' });
    expect(turn.events.map((e) => e.name)).toEqual(['fullstop.stop']);
    const [stop] = turn.events;
    expect(stop.attributes).toEqual({
      'fullstop.stop.reason': 'cancel.user',
      'fullstop.stop.grace_ms': 50,
      'fullstop.stop.settled_cooperatively': false,
      'fullstop.stop.signalled_ms': report!.signalledAt,
      'fullstop.stop.settled_ms': report!.settledAt,
      'fullstop.stop.hard_stop_ms': report!.hardStopAt,
      'fullstop.stop.marker_ms': report!.markerAt,
      'fullstop.stop.flushed_ms': report!.flushedAt,
      'fullstop.stop.emitted_ms': report!.emittedAt,
    });
    // The event is timed at the stop request: the span ends (at turn_aborted) at least emittedAt
    // after it, and no later after it than stop() took to answer, as this test saw it.
    expect(ms(stop.time)).toBeGreaterThan(ms(turn.startTime));
    expect(ms(turn.endTime) - ms(stop.time)).toBeGreaterThanOrEqual(report!.emittedAt - 0.01);
    expect(ms(turn.endTime) - ms(stop.time)).toBeLessThanOrEqual(answered - asked + 0.01);

    const tools = toolSpansOf(turn);
    expect(tools.map((s) => s.name).sort()).toEqual(['execute_tool crunch', 'execute_tool sh']);
    for (const tool of tools) {
      expect(tool.attributes['fullstop.tool.status']).toBe('aborted');
      expect(tool.attributes['gen_ai.tool.call.id']).toBe(callIdOf(tool.attributes['gen_ai.tool.name'] as string, entries));
      expect(tool.status.code).toBe(SpanStatusCode.UNSET);
    }

    const m = await collected();
    const duration = m.get('fullstop.stop.duration')!;
    expect(duration.descriptor).toMatchObject({ unit: 'ms' });
    expect(duration.dataPoints).toHaveLength(1);
    expect(duration.dataPoints[0].attributes).toEqual({ 'fullstop.stop.reason': 'cancel.user' });
    expect(duration.dataPoints[0].value).toMatchObject({ count: 1 });
    expect((duration.dataPoints[0].value as { sum: number }).sum).toBeCloseTo(report!.emittedAt, 6);
    const hard = m.get('fullstop.stop.hard')!;
    const byKind = Object.fromEntries(hard.dataPoints.map((p) => [p.attributes['fullstop.hard.kind'], p.value]));
    expect(byKind).toEqual({ worker: 1, process_group: 1, question: 1 });
  });

  it('a stop and a shutdown add to the histogram under their own reasons; a cooperative stop hard-stops nothing', async () => {
    const f = [flags(), flags()];
    const outcomes = ['s-a', 's-b'].map((sessionId, i) => runner.run(sessionId, (turn) => turn.tool('nap', {}, (token) => pool.run({ flags: f[i], ms: 60_000 }, { token, name: 'sleeper' }))));
    await Promise.all(f.map(started));
    const stopped = await runner.stop('s-a');
    const [shutDown] = await runner.shutdown();
    for (const report of [stopped, shutDown]) {
      expect(report).toMatchObject({ settledCooperatively: true, hardStopped: { workers: 0, processGroups: 0, questions: 0 } });
    }
    expect((await Promise.all(outcomes)).map((o) => o.status)).toEqual(['cancelled', 'cancelled']);
    const m = await collected();
    const points = m.get('fullstop.stop.duration')!.dataPoints;
    expect(points.map((p) => [p.attributes['fullstop.stop.reason'], (p.value as { count: number }).count]).sort())
      .toEqual([['cancel.shutdown', 1], ['cancel.user', 1]]);
    expect(m.get('fullstop.stop.hard')?.dataPoints ?? []).toEqual([]);
    const reasons = Object.fromEntries(spansNamed('invoke_agent').map((s) => [s.attributes['gen_ai.conversation.id'], s.events[0].attributes!['fullstop.stop.reason']]));
    expect(reasons).toEqual({ 's-a': 'cancel.user', 's-b': 'cancel.shutdown' });
  });

  it('a turn stopped before it started is a cancelled span with its stop, and no tool span', async () => {
    expect(await runner.stop('s-early', { turnId: 't-early', reason: 'cancel.client' })).toBeNull();
    let ran = false;
    const outcome = await runner.run('s-early', async (turn) => { ran = true; await turn.tool('never', {}, async () => 1); }, { turnId: 't-early' });
    expect(outcome.status).toBe('cancelled');
    expect(ran).toBe(false);
    const turn = onlyTurnSpan();
    expect(turn.attributes).toMatchObject({ 'fullstop.turn.id': 't-early', 'fullstop.turn.status': 'cancelled' });
    expect(turn.status.code).toBe(SpanStatusCode.UNSET);
    expect(turn.events.map((e) => [e.name, e.attributes!['fullstop.stop.reason']])).toEqual([['fullstop.stop', 'cancel.client']]);
    expect(toolSpansOf(turn)).toEqual([]);
    const m = await collected();
    expect(m.get('fullstop.stop.duration')!.dataPoints.map((p) => p.attributes)).toEqual([{ 'fullstop.stop.reason': 'cancel.client' }]);
  });

  it('a turn stopped by its caller\'s signal: the stop event has the signal\'s words as fullstop.stop.detail; the metric keeps the reason only', async () => {
    const outcome = await runner.run('s-signal', async () => 1, { turnId: 't-signal', signal: AbortSignal.abort('Client connection prematurely closed.'), signalReason: 'cancel.disconnect' });
    expect(outcome.status).toBe('cancelled');
    expect(onlyTurnSpan().events[0].attributes).toMatchObject({
      'fullstop.stop.reason': 'cancel.disconnect', 'fullstop.stop.detail': 'Client connection prematurely closed.',
    });
    const m = await collected();
    expect(m.get('fullstop.stop.duration')!.dataPoints.map((p) => p.attributes)).toEqual([{ 'fullstop.stop.reason': 'cancel.disconnect' }]);
  });
});

describe('a failed turn', () => {
  it('is the only span with status ERROR: with recordErrors, the error\'s message, error.type and the exception', async () => {
    recordingErrors();
    const outcome = await runner.run('s-fail', async () => { throw new RangeError('model refused'); }, { turnId: 't-fail' });
    expect(outcome.status).toBe('failed');
    const turn = onlyTurnSpan();
    expect(turn.status).toEqual({ code: SpanStatusCode.ERROR, message: 'model refused' });
    expect(turn.attributes).toMatchObject({ 'fullstop.turn.status': 'failed', 'error.type': 'RangeError' });
    expect(turn.events.map((e) => [e.name, e.attributes?.['exception.type'], e.attributes?.['exception.message']]))
      .toEqual([['exception', 'RangeError', 'model refused']]);
  });

  it('a thrown non-Error is rendered safely and typed _OTHER', async () => {
    recordingErrors();
    await runner.run('s-odd', async () => { throw Object.create(null); }, { turnId: 't-odd' });
    const turn = onlyTurnSpan();
    expect(turn.status.code).toBe(SpanStatusCode.ERROR);
    expect(turn.status.message).toBe('[object (null prototype)]');
    expect(turn.attributes['error.type']).toBe('_OTHER');
  });
});

describe('what the spans record of a turn\'s content', () => {
  it('by default, nothing: a failed call\'s and a failed turn\'s spans are errors with error.type only, no message, no exception', async () => {
    const secret = 'the user\'s file /home/ann/diary.txt';
    await runner.run('s-quiet', async (turn) => {
      await turn.tool('read', {}, async () => { throw new ToolError(`cannot read ${secret}`); }).catch(() => {});
      throw new RangeError(`model refused: ${secret}`);
    }, { turnId: 't-quiet' });
    const turn = onlyTurnSpan();
    const [tool] = toolSpansOf(turn);
    expect(turn.status).toEqual({ code: SpanStatusCode.ERROR });
    expect(turn.attributes['error.type']).toBe('RangeError');
    expect(turn.events).toEqual([]);
    expect(tool.status).toEqual({ code: SpanStatusCode.ERROR });
    expect(tool.attributes).toMatchObject({ 'fullstop.tool.status': 'failed', 'error.type': 'tool_error' });
    expect(JSON.stringify(exported.getFinishedSpans().map((s) => [s.attributes, s.status, s.events]))).not.toContain('diary');
  });

  it('refuses a recordErrors that is not a boolean, naming it', () => {
    expect(() => instrument(runner, { tracerProvider, meterProvider, recordErrors: 'yes' as any })).toThrow(new TypeError('options.recordErrors: expected a boolean, got "yes"'));
  });
});

describe('the turn span while the body runs', () => {
  it('is the active span: spans the body starts, before and after an await, and fetch-like work in a timer are its children', async () => {
    const manager = new AsyncLocalStorageContextManager().enable();
    context.setGlobalContextManager(manager);
    const tracer = tracerProvider.getTracer('test');
    try {
      await runner.run('s-active', async () => {
        tracer.startSpan('model call').end();
        await new Promise((resolve) => setTimeout(resolve, 1));
        await new Promise<void>((resolve) => setTimeout(() => { tracer.startSpan('fetch').end(); resolve(); }, 1));
      }, { turnId: 't-active' });
      const turn = onlyTurnSpan();
      for (const name of ['model call', 'fetch']) {
        const [span] = spansNamed(name);
        expect(span.spanContext().traceId).toBe(turn.spanContext().traceId);
        expect(parentOf(span)).toBe(turn.spanContext().spanId);
      }
      // Outside the body the turn span is not active.
      const after = tracer.startSpan('after');
      after.end();
      expect(parentOf(after as unknown as ReadableSpan)).toBeUndefined();
    } finally {
      context.disable();
    }
  });

  it('is no longer made active after off()', async () => {
    const manager = new AsyncLocalStorageContextManager().enable();
    context.setGlobalContextManager(manager);
    const tracer = tracerProvider.getTracer('test');
    try {
      off();
      await runner.run('s-off', async () => { tracer.startSpan('model call').end(); });
      const [span] = spansNamed('model call');
      expect(parentOf(span)).toBeUndefined();
    } finally {
      context.disable();
    }
  });
});

describe('await runner.run(...), then forceFlush() (a serverless function, a test)', () => {
  type Ending = 'completed' | 'failed' | 'cancelled';
  /** Runs a turn of `session` that ends as `ending` (a stop for `cancelled`), one tool call in it. */
  async function turnThat(ending: Ending, session: string): Promise<void> {
    let begun!: () => void;
    const running = new Promise<void>((resolve) => { begun = resolve; });
    const outcome$ = runner.run(session, async (turn) => {
      await turn.tool('t', {}, async () => 1);
      if (ending === 'failed') throw new RangeError('model refused');
      if (ending === 'completed') return;
      begun();
      await new Promise((resolve) => turn.signal.addEventListener('abort', resolve));
    }, { turnId: `t-${session}` });
    if (ending === 'cancelled') {
      await running;
      void runner.stop(session);
    }
    expect((await outcome$).status).toBe(ending);
  }
  const STATUS = { completed: SpanStatusCode.UNSET, failed: SpanStatusCode.ERROR, cancelled: SpanStatusCode.UNSET };

  it.each(['completed', 'failed', 'cancelled'] as const)('exports the %s turn\'s invoke_agent span with its status (a SimpleSpanProcessor)', async (ending) => {
    await turnThat(ending, `s-flush-${ending}`);
    await tracerProvider.forceFlush(); // nothing more: no wait for a later turn of the event loop
    const turn = onlyTurnSpan();
    expect(turn.attributes['fullstop.turn.status']).toBe(ending);
    expect(turn.status.code).toBe(STATUS[ending]);
    if (ending === 'cancelled') expect(turn.events.map((e) => e.name)).toEqual(['fullstop.stop']);
    expect(toolSpansOf(turn).map((s) => s.name)).toEqual(['execute_tool t']);
  });

  it.each(['completed', 'failed', 'cancelled'] as const)('exports the %s turn\'s invoke_agent span with its status (a BatchSpanProcessor)', async (ending) => {
    const batched = new InMemorySpanExporter();
    // Its timer never comes round during the test: only forceFlush() exports.
    const provider = new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(batched, { scheduledDelayMillis: 3_600_000 })] });
    off();
    off = instrument(runner, { tracerProvider: provider, meterProvider });
    try {
      await turnThat(ending, `s-batch-${ending}`);
      await provider.forceFlush();
      const turns = batched.getFinishedSpans().filter((s) => s.name === 'invoke_agent');
      expect(turns).toHaveLength(1);
      expect(turns[0]!.attributes['fullstop.turn.status']).toBe(ending);
      expect(turns[0]!.status.code).toBe(STATUS[ending]);
      expect(batched.getFinishedSpans().map((s) => s.name).sort()).toEqual(['execute_tool t', 'invoke_agent']);
    } finally {
      off();
      await provider.shutdown();
    }
  });
});

describe('an exporter that blocks', () => {
  /** An exporter whose export blocks the thread for `ms` (as a synchronous one can), then keeps the spans. */
  function blockingExporter(ms: number): SpanExporter & { spans: ReadableSpan[] } {
    const spans: ReadableSpan[] = [];
    return {
      spans,
      export(batch, done) {
        const until = performance.now() + ms;
        while (performance.now() < until);
        spans.push(...batch);
        done({ code: 0 });
      },
      shutdown: async () => {},
    };
  }

  it.each(['completed', 'cancelled'] as const)('behind a BatchSpanProcessor, does not delay run()\'s settling after its last event, and forceFlush() then exports the turn (a %s turn)', async (status) => {
    const exporter = blockingExporter(1000);
    // Its timer never comes round during the test: only forceFlush() exports.
    const slow = new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(exporter, { scheduledDelayMillis: 3_600_000 })] });
    off();
    off = instrument(runner, { tracerProvider: slow, meterProvider });
    let emitted = 0;
    // Before instrument's own listener: the moment the runner emits, before any span ends.
    runner.prependListener(status === 'completed' ? 'turn_completed' : 'turn_aborted', () => { emitted = performance.now(); });
    let begun!: () => void;
    const running = new Promise<void>((resolve) => { begun = resolve; });
    const outcome$ = runner.run('s-slow', async (turn) => {
      await turn.tool('t', {}, async () => 1);
      if (status === 'completed') return;
      begun();
      await new Promise((resolve) => turn.signal.addEventListener('abort', resolve));
    });
    if (status === 'cancelled') {
      await running;
      void runner.stop('s-slow');
    }
    const outcome = await outcome$;
    const settled = performance.now();
    expect(outcome.status).toBe(status);
    // An export on the way to run()'s settling would make this at least 1000 ms.
    expect(settled - emitted).toBeLessThan(500);
    expect(exporter.spans).toEqual([]);
    await slow.forceFlush();
    expect(exporter.spans.map((s) => [s.name, s.attributes['fullstop.turn.status']])).toContainEqual(['invoke_agent', status]);
    off();
    await slow.shutdown();
  }, 20_000);
});

describe('off()', () => {
  it('removes every listener instrument added, leaves the runner\'s other listeners, and ends the spans still open', async () => {
    const other = new TurnRunner({ registry, ledger });
    const mine = () => {};
    other.on('turn_started', mine);
    const before = EVENTS.map((e) => other.listenerCount(e));
    const offOther = instrument(other, { tracerProvider, meterProvider });
    expect(EVENTS.map((e) => other.listenerCount(e))).toEqual(before.map((n) => n + 1));

    let release!: () => void;
    let inTool!: () => void;
    const calling = new Promise<void>((r) => { inTool = r; });
    const outcome$ = other.run('s-off', (turn) => turn.tool('wait', {}, () => { inTool(); return new Promise<void>((r) => { release = r; }); }), { turnId: 't-off' });
    await calling;
    try {
      offOther();
      expect(EVENTS.map((e) => other.listenerCount(e))).toEqual(before);
      expect(other.listeners('turn_started')).toEqual([mine]);
      // The open turn and call spans are ended as they stand: nothing is left open for ever.
      const atOff = exported.getFinishedSpans().map((s) => [s.name, s.attributes['fullstop.turn.status'] ?? s.attributes['fullstop.tool.status']]);
      expect(atOff).toEqual([['execute_tool wait', undefined], ['invoke_agent', undefined]]);
    } finally {
      release();
    }
    expect((await outcome$).status).toBe('completed');
    await other.run('s-off', async () => 'after', { turnId: 't-after' });
    offOther(); // a second call does nothing
    expect(EVENTS.map((e) => other.listenerCount(e))).toEqual(before);
    expect(exported.getFinishedSpans()).toHaveLength(2);
  });
});

describe('instrument()', () => {
  it('refuses a bad runner or provider with a TypeError naming it, and adds nothing', () => {
    const counts = () => EVENTS.map((e) => runner.listenerCount(e));
    const before = counts();
    expect(() => instrument(undefined as never)).toThrow(TypeError);
    expect(() => instrument({} as never)).toThrow(/^runner: expected a TurnRunner/);
    expect(() => instrument(runner, null as never)).toThrow(/^options: expected an object/);
    expect(() => instrument(runner, { tracerProvider: {} as never })).toThrow(/^options\.tracerProvider: expected a TracerProvider/);
    expect(() => instrument(runner, { tracerProvider, meterProvider: 'x' as never })).toThrow(/^options\.meterProvider: expected a MeterProvider, got "x"/);
    expect(counts()).toEqual(before);
  });

  it('without providers, uses the global ones', async () => {
    const other = new TurnRunner({ registry });
    expect(trace.setGlobalTracerProvider(tracerProvider)).toBe(true);
    expect(metrics.setGlobalMeterProvider(meterProvider)).toBe(true);
    try {
      const offOther = instrument(other);
      await other.run('s-global', async () => 1, { turnId: 't-global' });
      offOther();
      expect(onlyTurnSpan().attributes['fullstop.turn.id']).toBe('t-global');
    } finally {
      trace.disable();
      metrics.disable();
    }
  });
});

describe('the optional peer', () => {
  it('import "fullstop" never loads @opentelemetry/api; "fullstop/otel" does', async () => {
    // A resolve hook that refuses every @opentelemetry/* import, so loading one is an error.
    writeFileSync(join(dir, 'hooks.mjs'), 'export async function resolve(s, c, next) { if (s.startsWith("@opentelemetry/")) throw new Error(`refused ${s}`); return next(s, c); }\n');
    writeFileSync(join(dir, 'register.mjs'), 'import { register } from "node:module"; register("./hooks.mjs", import.meta.url);\n');
    const load = (module: string) => new Promise<{ code: number; out: string }>((resolve) => {
      const url = new URL(`../dist/src/${module}`, import.meta.url).href;
      execFile(process.execPath, ['--import', join(dir, 'register.mjs'), '--input-type=module', '-e', `await import(${JSON.stringify(url)}); console.log('loaded')`],
        (error, stdout, stderr) => resolve({ code: error === null ? 0 : (error.code as number), out: stdout + stderr }));
    });
    const main = await load('index.js');
    expect(main).toEqual({ code: 0, out: 'loaded\n' });
    const otel = await load('otel/index.js');
    expect(otel.code).not.toBe(0);
    expect(otel.out).toContain('refused @opentelemetry/api');
  });
});

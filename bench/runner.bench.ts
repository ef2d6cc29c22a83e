/**
 * R1–R7: the stop of a turn whose tools all stop cooperatively, request → `turn_aborted` emitted,
 * split into the phases of its `StopReport`.
 *
 * The turn (a fresh turn id per sample): a `TurnRunner` with a real `Ledger` in a temp dir and a
 * 1-thread `TurnPool`; its body runs a pool task blocked in `sleep()`, a main-thread tool awaiting
 * `turn.signal`, and a `turn.say` stream (a chunk every STREAM_EVERY_MS). Once the task sleeps and
 * two chunks are written, `runner.stop(session)`; R1 is a `turn_aborted` listener's stamp minus
 * the stamp before `stop`. Phases: intent+signal = `signalledAt`, settle = `settledAt −
 * signalledAt`, hard stop, history = `markerAt − hardStopAt`, flush, emit.
 *
 * The floor, in the same rounds (sides alternate): the least the contract's stop order allows,
 * with no library — write the bytes the previous fullstop turn wrote before its stop (untimed,
 * unsynced as they are there), then time: append its intent line + fdatasync; abort an
 * AbortController (one listener) + notify a plain worker blocked in `Atomics.wait` [R2's peer];
 * the worker's message back [R3's]; append its history lines [R5's]; fdatasync [R6's]. Two
 * fdatasyncs, because the order requires the intent durable before the signal and the marker
 * durable before the event. Every stop must settle cooperatively, or the suite fails.
 */

import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { Worker } from 'node:worker_threads';
import { CancelledError, Ledger, TurnPool, TurnRegistry, TurnRunner, type StopReport } from '../src/index.js';
import { assertNothingLive, compare, flagCells, ready, summarize, type BenchResult, type Suite, type SuiteContext } from './harness.js';
import { GO, READY, type RawReport } from './workers/protocol.js';

const TASKS = new URL('./workers/tasks.js', import.meta.url).href;
const RAW_WORKER = new URL('./workers/raw.js', import.meta.url);
const SESSION = 'bench-runner';
/** Far above any cooperative settle, so a sample never times out into a hard stop. */
const GRACE_MS = 1000;
/** Main's pause between "the task is blocked" and the stop (it is really asleep, not on its way). */
const SETTLE_MS = 1;
/** The say stream's cadence: well above SETTLE_MS, so no chunk's write collides with the intent's. */
const STREAM_EVERY_MS = 10;
const CHUNKS_BEFORE_STOP = 2;
const CHUNK = 'Reading src/turn/runner.ts to see where the stop spends its time; next, the ledger… ';

const PHASES = ['signal', 'settle', 'hardStop', 'history', 'flush', 'emit'] as const;
type Phase = (typeof PHASES)[number];

export const suite: Suite = { name: 'runner', ids: ['R1', 'R2', 'R3', 'R4', 'R5', 'R6', 'R7'], run };

const phasesOf = (r: StopReport): Record<Phase, number> => ({
  signal: r.signalledAt, settle: r.settledAt - r.signalledAt, hardStop: r.hardStopAt - r.settledAt,
  history: r.markerAt - r.hardStopAt, flush: r.flushedAt - r.markerAt, emit: r.emittedAt - r.flushedAt,
});

/** What a stop wrote, split at its `cancelling` entry; `pre` is what the turn wrote before it. */
type TurnBytes = Record<'pre' | 'intent' | 'history', Buffer>;

interface StopSample {
  totalMs: number;
  phasesMs: Record<Phase, number>;
  /** The listener's stamp minus the report's `emittedAt` (the emit call itself, after the stamp). */
  listenerAfterEmittedAtMs: number;
  /** When a listener the body put on `turn.signal` ran (ms from the request). */
  abortSeenMs: number;
  /** When the pool task's `run()` rejected on main, ms after `signalledAt`. */
  poolRejectedAfterSignalMs: number;
  bytes: TurnBytes;
}

type OrderedSample = Record<'totalMs' | 'signalMs' | 'settleMs' | 'historyMs' | 'flushMs', number>;

function untilAborted(signal: AbortSignal): Promise<never> {
  return new Promise((_, reject) => {
    const onAbort = () => reject(new CancelledError('llm stream aborted', { reason: signal.reason }));
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
  });
}

class Lab {
  readonly dir = mkdtempSync(join(tmpdir(), 'fullstop-bench-runner-'));
  readonly ledgerPath = join(this.dir, 'history.jsonl');
  readonly registry = new TurnRegistry();
  readonly pool = new TurnPool({ filename: TASKS, minThreads: 1, maxThreads: 1 });
  readonly taskFlags = flagCells();
  readonly rawFlags = flagCells();
  readonly raw = new Worker(RAW_WORKER, { workerData: { flags: this.rawFlags } });
  ledger!: Ledger;
  runner!: TurnRunner;
  rawFile!: FileHandle;
  #ledgerEnd = 0;
  #turns = 0;

  async start(): Promise<void> {
    await once(this.raw, 'online');
    this.ledger = await Ledger.open(this.ledgerPath);
    this.rawFile = await open(join(this.dir, 'raw.jsonl'), 'a');
    this.runner = new TurnRunner({ registry: this.registry, pool: this.pool, ledger: this.ledger, graceMs: GRACE_MS });
  }

  /** One cooperative turn, stopped once its task sleeps and its stream has spoken. */
  async stopSample(): Promise<StopSample> {
    const { runner, pool, taskFlags: flags } = this;
    const turnId = `turn-${++this.#turns}`;
    Atomics.store(flags, READY, 0);
    let chunks = 0;
    let spoken!: () => void;
    const streamed = new Promise<void>((r) => { spoken = r; });
    const marks = { abort: Number.NaN, poolRejected: Number.NaN };
    const outcome$ = runner.run(SESSION, async (turn) => {
      turn.signal.addEventListener('abort', () => { marks.abort = performance.now(); }, { once: true });
      const compute = turn.tool('compute', { n: 1_000_000 }, (token) => pool.run({ flags }, { token, name: 'sleepsUntilStopped' })
        .catch((error: unknown) => { marks.poolRejected = performance.now(); throw error; }));
      const llm = turn.tool('llm', { model: 'bench', stream: true }, () => untilAborted(turn.signal));
      const stream = (async () => {
        try {
          for (;;) {
            await turn.say(`${CHUNK}${chunks}`);
            if (++chunks === CHUNKS_BEFORE_STOP) spoken();
            await delay(STREAM_EVERY_MS, undefined, { signal: turn.signal });
          }
        } catch (error) {
          if (!turn.signal.aborted) throw error;
        }
      })();
      await Promise.all([compute, llm, stream]);
    }, { turnId });
    await ready(flags, outcome$, `${turnId} compute`);
    await Promise.race([streamed, outcome$.then((o) => { throw new Error(`${turnId}: ended ${o.status} before the stop`, { cause: o.error }); })]);
    await delay(SETTLE_MS);

    let heardAt = Number.NaN;
    runner.once('turn_aborted', () => { heardAt = performance.now(); });
    const t0 = performance.now();
    const report = await runner.stop(SESSION);
    const outcome = await outcome$;

    if (report === null || outcome.status !== 'cancelled' || !report.settledCooperatively ||
      report.hardStopped.workers + report.hardStopped.processGroups + report.hardStopped.questions !== 0) {
      throw new Error(`${turnId}: expected a cooperative stop, got ${outcome.status} and ${JSON.stringify(report)}`);
    }
    if (!Number.isFinite(heardAt) || !Number.isFinite(marks.abort) || !Number.isFinite(marks.poolRejected)) {
      throw new Error(`${turnId}: missing stamps (turn_aborted ${heardAt}, abort ${marks.abort}, pool rejected ${marks.poolRejected})`);
    }
    return {
      totalMs: heardAt - t0,
      phasesMs: phasesOf(report),
      listenerAfterEmittedAtMs: heardAt - t0 - report.emittedAt,
      abortSeenMs: marks.abort - t0,
      poolRejectedAfterSignalMs: marks.poolRejected - t0 - report.signalledAt,
      bytes: this.#bytesOfLastTurn(turnId),
    };
  }

  /** The lines the last turn wrote, split at its `cancelling` entry (and checked for the marker). */
  #bytesOfLastTurn(turnId: string): TurnBytes {
    const file = readFileSync(this.ledgerPath);
    const mine = file.subarray(this.#ledgerEnd);
    this.#ledgerEnd = file.length;
    const lines = mine.toString('utf8').split('\n').filter((l) => l.length > 0).map((l) => `${l}\n`);
    const entries = lines.map((l) => JSON.parse(l) as { turnId: string; type: string; status?: string });
    const at = entries.findIndex((e) => e.type === 'status' && e.status === 'cancelling');
    if (at < 0 || entries.some((e) => e.turnId !== turnId) || !entries.slice(at).some((e) => e.type === 'turn_aborted') ||
      entries.filter((e) => e.type === 'tool_aborted').length !== 2) {
      throw new Error(`${turnId}: unexpected history ${JSON.stringify(entries.map((e) => e.status ?? e.type))}`);
    }
    const join = (ls: string[]) => Buffer.from(ls.join(''), 'utf8');
    return { pre: join(lines.slice(0, at)), intent: join(lines.slice(at, at + 1)), history: join(lines.slice(at + 1)) };
  }

  /** The floor: the raw work in the contract's order, each step timed; `undefined` (void) if the worker woke from no block. */
  async orderedSample(bytes: TurnBytes): Promise<OrderedSample | undefined> {
    await writeAll(this.rawFile, bytes.pre);
    // The raw worker, blocked in `Atomics.wait` once ready; `woke` is its wake message.
    Atomics.store(this.rawFlags, READY, 0);
    Atomics.store(this.rawFlags, GO, 0);
    const woke = (once(this.raw, 'message') as Promise<[RawReport]>).then(([m]) => m);
    this.raw.postMessage({ kind: 'wait' });
    await ready(this.rawFlags, woke, 'raw worker');
    await delay(SETTLE_MS);
    // A bare AbortController with one listener: the main-thread await the stop unwinds.
    const controller = new AbortController();
    const unwound = new Promise<void>((r) => controller.signal.addEventListener('abort', () => r(), { once: true }));
    const t0 = performance.now();
    await writeAll(this.rawFile, bytes.intent);
    await this.rawFile.datasync();
    controller.abort();
    Atomics.store(this.rawFlags, GO, 1);
    Atomics.notify(this.rawFlags, GO);
    const t1 = performance.now();
    await unwound;
    const { ok } = await woke;
    const t2 = performance.now();
    await writeAll(this.rawFile, bytes.history);
    const t3 = performance.now();
    await this.rawFile.datasync();
    const t4 = performance.now();
    return ok ? { totalMs: t4 - t0, signalMs: t1 - t0, settleMs: t2 - t1, historyMs: t3 - t2, flushMs: t4 - t3 } : undefined;
  }

  async close(): Promise<void> {
    const errors: unknown[] = [];
    const step = async (fn: () => unknown) => { try { await fn(); } catch (e) { errors.push(e); } };
    await step(() => this.pool.destroy());
    await step(() => this.raw.terminate());
    await step(() => this.ledger?.close());
    await step(() => this.rawFile?.close());
    await step(() => rmSync(this.dir, { recursive: true, force: true }));
    await step(() => assertNothingLive(this.registry, 'runner bench'));
    if (errors.length === 1) throw errors[0];
    if (errors.length > 1) throw new AggregateError(errors, 'runner bench: clean-up failed');
  }
}

async function writeAll(handle: FileHandle, buffer: Buffer): Promise<void> {
  let offset = 0;
  while (offset < buffer.length) {
    const { bytesWritten } = await handle.write(buffer, offset, buffer.length - offset, null);
    offset += bytesWritten;
  }
}

/** Retake a raw sample while it is void (its worker woke from no block); at most `tries` times. */
async function retake<T>(sample: () => Promise<T | undefined>, voided: { count: number }, tries = 5): Promise<T> {
  for (let i = 0; i < tries; i++) {
    const value = await sample();
    if (value !== undefined) return value;
    voided.count++;
  }
  throw new Error(`runner bench: ${tries} void raw samples in a row (the raw worker never blocked before its wake)`);
}

const median = (xs: readonly number[]) => summarize(xs).median;
const round3 = (x: number) => Math.round(x * 1000) / 1000;

async function run(ctx: SuiteContext): Promise<BenchResult[]> {
  const rounds = ctx.quick ? 30 : 400;
  const lab = new Lab();
  try {
    await lab.start();
    const stops: StopSample[] = [];
    const floors: OrderedSample[] = [];
    const voided = { count: 0 };
    for (let round = -(ctx.quick ? 3 : 10); round < rounds; round++) { // warm-up rounds first
      const stopFirst = round % 2 === 0;
      let stop = stopFirst ? await lab.stopSample() : undefined;
      const floor = await retake(() => lab.orderedSample((stop ?? stops.at(-1) ?? { bytes: EMPTY }).bytes), voided);
      stop ??= await lab.stopSample();
      if (round >= 0) { stops.push(stop); floors.push(floor); }
    }
    ctx.progress(`runner: R1–R7 ${rounds} rounds (stop, ordered floor)`);
    const poolStats = lab.pool.stats();
    if (poolStats.hardStops !== 0) throw new Error(`runner bench: ${poolStats.hardStops} hard stops (every stop should be cooperative)`);
    if (voided.count > rounds / 10) throw new Error(`runner bench: ${voided.count} void raw samples in ${rounds} rounds`);
    return rows(stops, floors, { rounds, cooperativeStops: poolStats.cooperativeStops, voidedRaw: voided.count });
  } finally {
    await lab.close();
  }
}

const EMPTY: TurnBytes = { pre: Buffer.alloc(0), intent: Buffer.from('{}\n'), history: Buffer.from('{}\n') };

function rows(stops: StopSample[], floors: OrderedSample[], counts: Record<string, number>): BenchResult[] {
  const phase = (p: Phase) => stops.map((s) => s.phasesMs[p] * 1000);
  const floor = (k: keyof OrderedSample) => floors.map((o) => o[k] * 1000);
  const phaseMedianUs = Object.fromEntries(PHASES.map((p) => [p, round3(median(phase(p)))]));
  const last = stops.at(-1)!.bytes;
  const peer = 'no raw peer: vs the whole ordered floor';
  const row = (id: string, metric: string, fullstop: number[], name: string, base: number[], extra?: Record<string, unknown>) =>
    compare({ id, metric, unit: 'µs', better: 'lower', extra }, fullstop, name, base, { paired: true });
  const r1 = compare({
    id: 'R1', metric: 'cooperative turn: stop request → turn_aborted emitted', unit: 'ms', better: 'lower',
    extra: {
      goal: '≤ 1.15×', phaseMedianUs,
      intentPlusFlushShareOfTotal: round3(median(stops.map((s) => (s.phasesMs.signal + s.phasesMs.flush) / s.totalMs))),
      emitCallAfterEmittedAtUs: round3(median(stops.map((s) => s.listenerAfterEmittedAtMs)) * 1000),
      stopBytes: { intent: last.intent.length, history: last.history.length, preStop: last.pre.length }, ...counts, graceMs: GRACE_MS,
    },
  }, stops.map((s) => s.totalMs), 'ordered floor: intent+fdatasync, abort+notify→wake, history+fdatasync', floors.map((o) => o.totalMs), { paired: true });
  return [
    r1,
    row('R2', 'phase intent+signal (signalledAt)', phase('signal'), 'raw intent append+fdatasync, abort + notify', floor('signalMs'),
      { bodyAbortListenerRanAtUs: round3(median(stops.map((s) => s.abortSeenMs)) * 1000) }),
    row('R3', 'phase settle: sleep() task + awaiting tool', phase('settle'), 'raw notify → the worker\'s message back', floor('settleMs'),
      { poolRunRejectedAfterSignalUs: round3(median(stops.map((s) => s.poolRejectedAfterSignalMs)) * 1000) }),
    row('R4', 'phase hard stop (nothing left)', phase('hardStop'), peer, floor('totalMs')),
    row('R5', 'phase history: 4 entries appended', phase('history'), 'raw append of the same bytes', floor('historyMs')),
    row('R6', 'phase flush: fdatasync after the history', phase('flush'), 'raw fdatasync after the same bytes', floor('flushMs')),
    row('R7', 'phase emit (flushedAt → emittedAt)', phase('emit'), peer, floor('totalMs')),
  ];
}

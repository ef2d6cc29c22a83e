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

import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { CancelledError, Ledger, TurnPool, TurnRegistry, TurnRunner, type StopReport, type Turn } from '../src/index.js';
import { assertNothingLive, compare, flagCells, median, RawWorker, ready, samplePairs, settle, type BenchResult, type Suite } from './harness.js';
import { GO, READY } from './workers/protocol.js';

/** Far above any cooperative settle, so a sample never times out into a hard stop. */
const GRACE_MS = 1000;
/** The say stream's cadence: well above the settle pause, so no chunk's write collides with the intent's. */
const STREAM_EVERY_MS = 10;
const CHUNK = 'Reading src/turn/runner.ts to see where the stop spends its time; next, the ledger… ';
const PHASES = ['signal', 'settle', 'hardStop', 'history', 'flush', 'emit'] as const;

/** What a stop wrote, split at its `cancelling` entry; `pre` is what the turn wrote before it. */
type TurnBytes = Record<'pre' | 'intent' | 'history', Buffer>;
/** One stop, in ms from the request: its total and phases; when the body's abort listener ran; when the pool's run() rejected. */
type StopSample = { totalMs: number; report: StopReport; listenerAfterEmittedAtMs: number; abortSeenMs: number; poolRejectedAfterSignalMs: number };
type OrderedSample = Record<'totalMs' | 'signalMs' | 'settleMs' | 'historyMs' | 'flushMs', number>;

const phasesOf = (r: StopReport): Record<(typeof PHASES)[number], number> => ({
  signal: r.signalledAt, settle: r.settledAt - r.signalledAt, hardStop: r.hardStopAt - r.settledAt,
  history: r.markerAt - r.hardStopAt, flush: r.flushedAt - r.markerAt, emit: r.emittedAt - r.flushedAt,
});

class Lab {
  readonly dir = mkdtempSync(join(tmpdir(), 'fullstop-bench-runner-'));
  readonly ledgerPath = join(this.dir, 'history.jsonl');
  readonly registry = new TurnRegistry();
  readonly pool = new TurnPool({ filename: new URL('./workers/tasks.js', import.meta.url).href, minThreads: 1, maxThreads: 1 });
  readonly flags = flagCells();
  readonly raw = new RawWorker();
  ledger?: Ledger;
  runner!: TurnRunner;
  rawFile?: FileHandle;
  /** The bytes the last stopped turn wrote: the floor writes the same. */
  bytes: TurnBytes = { pre: Buffer.alloc(0), intent: Buffer.from('{}\n'), history: Buffer.from('{}\n') };
  #ledgerEnd = 0;
  #turns = 0;

  async start(): Promise<void> {
    await this.raw.online;
    this.ledger = await Ledger.open(this.ledgerPath);
    this.rawFile = await open(join(this.dir, 'raw.jsonl'), 'a');
    this.runner = new TurnRunner({ registry: this.registry, pool: this.pool, ledger: this.ledger, graceMs: GRACE_MS });
  }

  /** The body: a pool task in `sleep()`, a tool awaiting the signal, a say stream; `spoken` after two chunks. */
  #body(turn: Turn, spoken: () => void, marks: { abort: number; poolRejected: number }) {
    turn.signal.addEventListener('abort', () => { marks.abort = performance.now(); }, { once: true });
    const compute = turn.tool('compute', { n: 1_000_000 }, (token) => this.pool.run({ flags: this.flags }, { token, name: 'sleepsUntilStopped' })
      .catch((error: unknown) => { marks.poolRejected = performance.now(); throw error; }));
    const llm = turn.tool('llm', { model: 'bench', stream: true }, () => new Promise((_, reject) => {
      const onAbort = () => reject(new CancelledError('llm stream aborted', { reason: turn.signal.reason }));
      if (turn.signal.aborted) onAbort();
      else turn.signal.addEventListener('abort', onAbort, { once: true });
    }));
    const stream = (async () => {
      try {
        for (let chunks = 0; ; await delay(STREAM_EVERY_MS, undefined, { signal: turn.signal })) {
          await turn.say(`${CHUNK}${chunks}`);
          if (++chunks === 2) spoken();
        }
      } catch (error) {
        if (!turn.signal.aborted) throw error;
      }
    })();
    return Promise.all([compute, llm, stream]);
  }

  /** One cooperative turn, stopped once its task sleeps and its stream has spoken. */
  async stopSample(): Promise<StopSample> {
    const turnId = `turn-${++this.#turns}`;
    Atomics.store(this.flags, READY, 0);
    let spoken!: () => void;
    const streamed = new Promise<void>((r) => { spoken = r; });
    const marks = { abort: Number.NaN, poolRejected: Number.NaN };
    const outcome$ = this.runner.run('bench-runner', (turn) => this.#body(turn, spoken, marks), { turnId });
    await ready(this.flags, outcome$, `${turnId} compute`);
    await Promise.race([streamed, outcome$.then((o) => { throw new Error(`${turnId}: ended ${o.status} before the stop`, { cause: o.error }); })]);
    await settle();
    let heardAt = Number.NaN;
    this.runner.once('turn_aborted', () => { heardAt = performance.now(); });
    const t0 = performance.now();
    const report = await this.runner.stop('bench-runner');
    const outcome = await outcome$;
    if (report === null || outcome.status !== 'cancelled' || !report.settledCooperatively ||
      report.hardStopped.workers + report.hardStopped.processGroups + report.hardStopped.questions !== 0) {
      throw new Error(`${turnId}: expected a cooperative stop, got ${outcome.status} and ${JSON.stringify(report)}`);
    }
    if (![heardAt, marks.abort, marks.poolRejected].every(Number.isFinite)) {
      throw new Error(`${turnId}: missing stamps (turn_aborted ${heardAt}, abort ${marks.abort}, pool rejected ${marks.poolRejected})`);
    }
    this.#keepBytesOf(turnId);
    return {
      totalMs: heardAt - t0, report, listenerAfterEmittedAtMs: heardAt - t0 - report.emittedAt,
      abortSeenMs: marks.abort - t0, poolRejectedAfterSignalMs: marks.poolRejected - t0 - report.signalledAt,
    };
  }

  /** Keep the lines the last turn wrote, split at its `cancelling` entry (and checked for the marker). */
  #keepBytesOf(turnId: string): void {
    const file = readFileSync(this.ledgerPath);
    const lines = file.subarray(this.#ledgerEnd).toString('utf8').split('\n').filter((l) => l.length > 0).map((l) => `${l}\n`);
    this.#ledgerEnd = file.length;
    const entries = lines.map((l) => JSON.parse(l) as { turnId: string; type: string; status?: string });
    const at = entries.findIndex((e) => e.type === 'status' && e.status === 'cancelling');
    if (at < 0 || entries.some((e) => e.turnId !== turnId) || !entries.slice(at).some((e) => e.type === 'turn_aborted') ||
      entries.filter((e) => e.type === 'tool_aborted').length !== 2) {
      throw new Error(`${turnId}: unexpected history ${JSON.stringify(entries.map((e) => e.status ?? e.type))}`);
    }
    const join = (ls: string[]) => Buffer.from(ls.join(''), 'utf8');
    this.bytes = { pre: join(lines.slice(0, at)), intent: join(lines.slice(at, at + 1)), history: join(lines.slice(at + 1)) };
  }

  /** The floor: the raw work in the contract's order, each step timed; `undefined` (void) if the worker woke from no block. */
  async orderedSample(): Promise<OrderedSample | undefined> {
    const { bytes, rawFile } = this;
    await append(rawFile!, bytes.pre);
    const { report, acted } = await this.raw.sample({ kind: 'wait' }, async () => {
      await settle();
      // A bare AbortController with one listener: the main-thread await the stop unwinds.
      const controller = new AbortController();
      const unwound = new Promise<void>((r) => controller.signal.addEventListener('abort', () => r(), { once: true }));
      const t0 = performance.now();
      await append(rawFile!, bytes.intent);
      await rawFile!.datasync();
      controller.abort();
      Atomics.store(this.raw.flags, GO, 1);
      Atomics.notify(this.raw.flags, GO);
      return { t0, t1: performance.now(), unwound };
    });
    await acted.unwound;
    const t2 = performance.now();
    await append(rawFile!, bytes.history);
    const t3 = performance.now();
    await rawFile!.datasync();
    const [{ t0, t1 }, t4] = [acted, performance.now()];
    return report.ok ? { totalMs: t4 - t0, signalMs: t1 - t0, settleMs: t2 - t1, historyMs: t3 - t2, flushMs: t4 - t3 } : undefined;
  }

  async close(): Promise<void> {
    const closed = await Promise.allSettled([this.pool.destroy(), this.raw.close(), this.ledger?.close(), this.rawFile?.close()]);
    rmSync(this.dir, { recursive: true, force: true });
    for (const c of closed) if (c.status === 'rejected') throw c.reason;
    assertNothingLive(this.registry, 'runner bench');
  }
}

/** Append all of `bytes` (one write: a short write would time less than the stop writes). */
async function append(file: FileHandle, bytes: Buffer): Promise<void> {
  const { bytesWritten } = await file.write(bytes);
  if (bytesWritten !== bytes.length) throw new Error(`runner bench: short write (${bytesWritten} of ${bytes.length} bytes)`);
}

function rows(stops: StopSample[], floors: OrderedSample[], bytes: TurnBytes, counts: Record<string, number>): BenchResult[] {
  const phase = (p: (typeof PHASES)[number]) => stops.map((s) => phasesOf(s.report)[p] * 1000);
  const floor = (k: keyof OrderedSample) => floors.map((o) => o[k] * 1000);
  const round3 = (x: number) => Math.round(x * 1000) / 1000;
  const medianUs = (ms: number[]) => round3(median(ms) * 1000);
  const row = (id: string, metric: string, fullstop: number[], name: string, base: number[], extra?: Record<string, unknown>) =>
    compare({ id, metric, unit: 'µs', better: 'lower', extra }, fullstop, name, base, { paired: true });
  const peer = 'no raw peer: vs the whole ordered floor';
  const r1 = compare({
    id: 'R1', metric: 'cooperative turn: stop request → turn_aborted emitted', unit: 'ms', better: 'lower',
    extra: {
      goal: '≤ 1.15×', phaseMedianUs: Object.fromEntries(PHASES.map((p) => [p, round3(median(phase(p)))])),
      intentPlusFlushShareOfTotal: round3(median(stops.map((s) => (s.report.signalledAt + s.report.flushedAt - s.report.markerAt) / s.totalMs))),
      emitCallAfterEmittedAtUs: medianUs(stops.map((s) => s.listenerAfterEmittedAtMs)),
      stopBytes: { intent: bytes.intent.length, history: bytes.history.length, preStop: bytes.pre.length }, ...counts, graceMs: GRACE_MS,
    },
  }, stops.map((s) => s.totalMs), 'ordered floor: intent+fdatasync, abort+notify→wake, history+fdatasync', floors.map((o) => o.totalMs), { paired: true });
  return [
    r1,
    row('R2', 'phase intent+signal (signalledAt)', phase('signal'), 'raw intent append+fdatasync, abort + notify', floor('signalMs'),
      { bodyAbortListenerRanAtUs: medianUs(stops.map((s) => s.abortSeenMs)) }),
    row('R3', 'phase settle: sleep() task + awaiting tool', phase('settle'), 'raw notify → the worker\'s message back', floor('settleMs'),
      { poolRunRejectedAfterSignalUs: medianUs(stops.map((s) => s.poolRejectedAfterSignalMs)) }),
    row('R4', 'phase hard stop (nothing left)', phase('hardStop'), peer, floor('totalMs')),
    row('R5', 'phase history: 4 entries appended', phase('history'), 'raw append of the same bytes', floor('historyMs')),
    row('R6', 'phase flush: fdatasync after the history', phase('flush'), 'raw fdatasync after the same bytes', floor('flushMs')),
    row('R7', 'phase emit (flushedAt → emittedAt)', phase('emit'), peer, floor('totalMs')),
  ];
}

export const suite: Suite = {
  name: 'runner',
  ids: ['R1', 'R2', 'R3', 'R4', 'R5', 'R6', 'R7'],
  async run(ctx) {
    const rounds = ctx.quick ? 30 : 400;
    const lab = new Lab();
    try {
      await lab.start();
      ctx.progress(`runner: R1–R7 ${rounds} rounds (stop, ordered floor)`);
      // The floor writes the bytes of the latest stop: its own round's when the stop went first, else the previous round's.
      const { samples, voided } = await samplePairs('R1', { pairs: rounds, warmup: ctx.quick ? 3 : 10 }, {
        stop: () => lab.stopSample(),
        floor: () => lab.orderedSample(),
      });
      const poolStats = lab.pool.stats();
      if (poolStats.hardStops !== 0) throw new Error(`runner bench: ${poolStats.hardStops} hard stops (every stop should be cooperative)`);
      return rows(samples.stop, samples.floor, lab.bytes, { rounds, cooperativeStops: poolStats.cooperativeStops, voidedRaw: voided });
    } finally {
      await lab.close();
    }
  },
};

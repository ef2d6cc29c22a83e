/**
 * The history a runner writes stays true and readable whatever the body or a listener does: every
 * throw fails the turn, listeners cannot change history or outcome, every output has its call, and
 * a turn id is used once.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Ledger, TurnRegistry, TurnRunner, type LedgerEntry } from '../dist/src/index.js';

const registry = new TurnRegistry();
let dir: string;
let ledger: Ledger;
let runner: TurnRunner;

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'fullstop-runner-history-'));
  ledger = await Ledger.open(join(dir, 'history.jsonl'));
  runner = new TurnRunner({ registry, ledger, graceMs: 100 });
});

afterEach(async () => {
  await ledger.close();
  rmSync(dir, { recursive: true, force: true });
  expect(registry.stats()).toEqual({ liveTokens: 0, liveSlots: 0, liveBridges: 0, liveOwners: 0 });
});

function onDisk(): LedgerEntry[] {
  return readFileSync(ledger.path, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as LedgerEntry);
}

const typeOf = (e: LedgerEntry) => (e.type === 'status' ? `status:${(e as { status: string }).status}` : e.type);

/** Every tool_output/tool_aborted has its tool_call earlier in the same turn, and every call exactly one output. */
function expectCallsPaired(entries: LedgerEntry[]): void {
  const open = new Set<string>();
  const closed = new Set<string>();
  for (const e of entries) {
    const key = `${e.turnId}/${(e as { callId?: string }).callId}`;
    if (e.type === 'tool_call') open.add(key);
    if (e.type === 'tool_output' || e.type === 'tool_aborted') {
      expect(open.has(key), `${e.type} of ${key} without its tool_call`).toBe(true);
      expect(closed.has(key), `a second output for ${key}`).toBe(false);
      closed.add(key);
    }
  }
  expect([...open].sort()).toEqual([...closed].sort());
}

/** Collects the warnings a throwing listener raises. */
function warnings(): { list: Error[]; stop: () => void } {
  const list: Error[] = [];
  const on = (w: Error) => { if (w.name === 'FullstopListenerWarning') list.push(w); };
  process.on('warning', on);
  return { list, stop: () => process.off('warning', on) };
}

describe('a body that throws', () => {
  const hostileToString = { toString() { throw new Error('cannot render me'); } };
  it.each([
    ['undefined', undefined, 'undefined'],
    ['null', null, 'null'],
    ['Object.create(null)', Object.create(null), '[object (null prototype)]'],
    ['an object whose toString throws', hostileToString, '[object Object]'],
  ])('%s ends the turn failed, with a safe rendering as the reason', async (_label, thrown, rendering) => {
    const outcome = await runner.run('s', async () => { throw thrown; }, { turnId: 't' });
    expect(outcome.status).toBe('failed');
    expect(outcome.error).toBe(thrown);
    expect(onDisk().map(typeOf)).toEqual(['turn_started', 'status:failed']);
    expect(onDisk().at(-1)).toMatchObject({ reason: rendering });
  });
});

describe('throwing event listeners', () => {
  it.each(['turn_started', 'tool_output', 'say', 'question', 'turn_completed'])('on %s change neither the history nor the outcome; every listener gets the event; a warning says so', async (event) => {
    const w = warnings();
    const seen: string[] = [];
    runner.on(event, () => { throw new Error(`listener of ${event} broke`); });
    runner.on(event, (p: { turnId: string }) => seen.push(p.turnId));
    runner.on('question', ({ questionId }: { questionId: string }) => runner.answer(questionId, 'yes'));
    try {
      const outcome = await runner.run('s', async (turn) => {
        await turn.say('hello');
        const answer = await turn.ask('go on?');
        return turn.tool('echo', { answer }, async () => answer);
      }, { turnId: 't' });
      expect(outcome).toMatchObject({ status: 'completed', value: 'yes' });
      expect(seen).toEqual(['t']);
      expect(onDisk().map(typeOf)).toEqual(['turn_started', 'say', 'tool_call', 'tool_output', 'status:completed']);
      expectCallsPaired(onDisk());
      await new Promise((r) => setImmediate(r)); // warnings are emitted on the next tick
      expect(w.list.map((x) => x.message)).toEqual([expect.stringContaining(`listener of ${event} broke`)]);
    } finally {
      w.stop();
    }
  });

  it('on turn_aborted change neither the stop nor its report, and run() resolves cancelled', async () => {
    const w = warnings();
    const reports: unknown[] = [];
    runner.on('turn_aborted', () => { throw new Error('abort listener broke'); });
    runner.on('turn_aborted', ({ report }: { report: unknown }) => reports.push(report));
    runner.on('turn_failed', () => { throw new Error('never called'); });
    try {
      let running!: () => void;
      const bodyRuns = new Promise<void>((r) => { running = r; });
      const outcome$ = runner.run('s', (turn) => new Promise((_, reject) => { turn.signal.addEventListener('abort', () => reject(turn.signal.reason)); running(); }), { turnId: 't' });
      await bodyRuns;
      const report = await runner.stop('s');
      const outcome = await outcome$;
      expect(outcome).toMatchObject({ status: 'cancelled', report });
      expect(reports).toEqual([report]);
      expect(onDisk().map(typeOf)).toEqual(['turn_started', 'status:cancelling', 'turn_aborted', 'status:cancelled']);
      await new Promise((r) => setImmediate(r));
      expect(w.list).toHaveLength(1);
    } finally {
      w.stop();
    }
  });

  it('that reject (async listeners) are reported too, without an unhandled rejection', async () => {
    const w = warnings();
    const warned = new Promise<void>((resolve) => {
      const on = (warning: Error) => { if (warning.name === 'FullstopListenerWarning') { process.off('warning', on); resolve(); } };
      process.on('warning', on);
    });
    runner.on('turn_completed', async () => { throw new Error('async listener broke'); });
    try {
      expect((await runner.run('s', async () => 1)).status).toBe('completed');
      await warned;
      expect(w.list.map((x) => x.message)).toEqual([expect.stringContaining('async listener broke')]);
    } finally {
      w.stop();
    }
  });
});

describe('tool calls and their outputs', () => {
  it('args JSON cannot encode are a TypeError at the call; nothing is recorded, and a later stop leaves no orphan output', async () => {
    let toolRan = false;
    let refusal: unknown;
    let running!: () => void;
    const waiting = new Promise<void>((r) => { running = r; });
    const outcome$ = runner.run('s', async (turn) => {
      await turn.tool('big', { n: 10n }, async () => { toolRan = true; }).catch((e: unknown) => { refusal = e; });
      await turn.tool('cyclic', (() => { const a: Record<string, unknown> = {}; a.self = a; return a; })(), async () => { toolRan = true; }).catch(() => {});
      await turn.tool('waits', { ok: true }, (token) => new Promise((_, reject) => { token.signal.addEventListener('abort', () => reject(token.signal.reason)); running(); }));
    }, { turnId: 't' });
    await waiting;
    await runner.stop('s');
    expect((await outcome$).status).toBe('cancelled');
    expect(refusal).toBeInstanceOf(TypeError);
    expect(String((refusal as Error).message)).toMatch(/^args: cannot be recorded as JSON/);
    expect(toolRan).toBe(false);
    const entries = onDisk();
    expect(entries.map(typeOf)).toEqual(['turn_started', 'tool_call', 'status:cancelling', 'tool_aborted', 'turn_aborted', 'status:cancelled']);
    expectCallsPaired(entries);
  });

  it('a value JSON cannot encode is recorded as a failed output and the call rejects with a TypeError', async () => {
    let failure: unknown;
    const outcome = await runner.run('s', async (turn) => {
      await turn.tool('big', {}, async () => 10n).catch((e: unknown) => { failure = e; });
      return 'went on';
    });
    expect(outcome.status).toBe('completed');
    expect(failure).toBeInstanceOf(TypeError);
    const output = onDisk().find((e) => e.type === 'tool_output');
    expect(output).toMatchObject({ success: false, output: expect.stringMatching(/cannot be recorded as JSON/) });
    expectCallsPaired(onDisk());
  });

  it('a tool_output listener that throws never makes a second output for the call', async () => {
    const w = warnings();
    runner.on('tool_output', () => { throw new Error('boom'); });
    try {
      const outcome = await runner.run('s', (turn) => turn.tool('one', {}, async () => 1));
      expect(outcome).toMatchObject({ status: 'completed', value: 1 });
      expect(onDisk().filter((e) => e.type === 'tool_output')).toHaveLength(1);
    } finally {
      w.stop();
    }
  });
});

describe('turn ids', () => {
  it('a turn id already in the ledger is refused before anything starts, also by a runner on the reopened ledger', async () => {
    expect((await runner.run('s', async () => 1, { turnId: 'once' })).status).toBe('completed');
    const before = readFileSync(ledger.path, 'utf8');
    let ran = false;
    await expect(runner.run('other', async () => { ran = true; }, { turnId: 'once' })).rejects.toThrow(/turn id "once" is already used in the ledger/);
    await ledger.close();
    ledger = await Ledger.open(join(dir, 'history.jsonl'));
    const again = new TurnRunner({ registry, ledger });
    await expect(again.run('s', async () => { ran = true; }, { turnId: 'once' })).rejects.toThrow(/already used/);
    expect(ran).toBe(false);
    expect(readFileSync(ledger.path, 'utf8')).toBe(before);
    expect(registry.stats().liveTokens).toBe(0);
  });

  it('two sessions running at once cannot share a turn id', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => { release = r; });
    const first = runner.run('a', () => gate, { turnId: 'shared' });
    await expect(runner.run('b', async () => 1, { turnId: 'shared' })).rejects.toThrow(/already used by a running turn/);
    release();
    expect((await first).status).toBe('completed');
  });
});

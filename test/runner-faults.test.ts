/**
 * A runner stop keeps its promises under faults: a failing ledger still stops the turn (its error
 * goes into the report), any cancel of the turn's token is governed by the runner's grace, nothing
 * of a turn starts once its stop began, and bad options change nothing.
 */
import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  exec, isCancelledError, Ledger, TurnPool, TurnRegistry, TurnRunner, type LedgerEntry,
} from '../dist/src/index.js';
import { flags, started } from './support/handshake.js';
import { eventually, isGone } from './support/leaks.js';

const tasks = new URL('./fixtures/runner/tasks.mjs', import.meta.url).href;
const registry = new TurnRegistry();
// The pool's own grace is short on purpose: a runner's turn must never be cut by it.
const pool = new TurnPool({ filename: tasks, minThreads: 1, maxThreads: 2, graceMs: 50 });
let dir: string;
let ledger: Ledger;
let runner: TurnRunner;

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'fullstop-runner-faults-'));
  ledger = await Ledger.open(join(dir, 'history.jsonl'));
  runner = new TurnRunner({ registry, pool, ledger, graceMs: 100 });
});

afterEach(async () => {
  vi.restoreAllMocks();
  await ledger.close().catch(() => {});
  rmSync(dir, { recursive: true, force: true });
  expect(registry.stats()).toEqual({ liveTokens: 0, liveSlots: 0, liveBridges: 0, liveOwners: 0 });
  expect(pool.stats()).toMatchObject({ running: 0, queued: 0 });
});

afterAll(() => pool.destroy());

function lines(path: string): LedgerEntry[] {
  return readFileSync(path, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as LedgerEntry);
}

const typeOf = (e: LedgerEntry) => (e.type === 'status' ? `status:${(e as { status: string }).status}` : e.type);

/** A model stream bound to the turn's signal: resolves with how it ended. */
function streamUntilAborted(signal: AbortSignal): Promise<'aborted'> {
  return new Promise((resolve) => {
    const timer = setInterval(() => {}, 10);
    signal.addEventListener('abort', () => { clearInterval(timer); resolve('aborted'); }, { once: true });
  });
}

describe('a failed ledger never cancels the stop', () => {
  it('with the ledger closed mid-turn: signal, grace and hard stop happen, run() resolves cancelled with ledgerError, the event fires, and the next open closes the turn', async () => {
    const f = flags();
    let stream: Promise<string> | undefined;
    const aborted: unknown[] = [];
    runner.on('turn_aborted', (p) => aborted.push(p));
    const outcome$ = runner.run('s', async (turn) => {
      stream = streamUntilAborted(turn.signal);
      await turn.tool('spins', {}, (token) => pool.run({ flags: f }, { token, name: 'spins' }));
    }, { turnId: 't-closed' });
    await started(f);
    const hardStopsBefore = pool.stats().hardStops;
    await ledger.close();
    const report = await runner.stop('s', { graceMs: 200 });
    const outcome = await outcome$;

    expect(report!.ledgerError).toBeInstanceOf(Error);
    expect(String((report!.ledgerError as Error).message)).toMatch(/closed/);
    expect(await stream).toBe('aborted');
    expect(report).toMatchObject({ settledCooperatively: false, hardStopped: { workers: 1, processGroups: 0, questions: 0 } });
    expect(report!.settledAt).toBeGreaterThanOrEqual(195);
    expect(pool.stats().hardStops).toBe(hardStopsBefore + 1);
    expect(outcome).toMatchObject({ status: 'cancelled', report });
    expect(aborted).toHaveLength(1);

    const reopened = await Ledger.open(ledger.path);
    try {
      const entries = await reopened.entries({ turnId: 't-closed' });
      expect(entries.map(typeOf)).toEqual(['turn_started', 'tool_call', 'tool_aborted', 'status:interrupted']);
    } finally {
      await reopened.close();
    }
  });

  describe('on a full disk (a 64 KiB tmpfs)', () => {
    let mnt: string;
    let mounted = false;
    let refused = '';

    beforeEach(() => {
      mnt = join(dir, 'small');
      mkdirSync(mnt);
      try {
        execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', mnt], { stdio: 'pipe' });
        mounted = true;
      } catch (e) {
        mounted = false;
        refused = String((e as { stderr?: Buffer }).stderr ?? e).trim();
      }
    });

    afterEach(() => {
      if (mounted) execFileSync('umount', ['-l', mnt]);
      mounted = false;
    });

    it('stops the turn (worker, process tree, model stream), reports ENOSPC as ledgerError, and Ledger.open then says the disk is full and what to free', async (ctx) => {
      if (!mounted) {
        console.log(`skipped: cannot mount a tmpfs here (${refused})`);
        ctx.skip();
      }
      const path = join(mnt, 'history.jsonl');
      const small = await Ledger.open(path);
      const r = new TurnRunner({ registry, pool, ledger: small, graceMs: 300 });
      const f = flags();
      const pidFile = join(dir, 'leader.pid');
      let stream: Promise<string> | undefined;
      let treePid = 0;
      const outcome$ = r.run('disk', async (turn) => {
        stream = streamUntilAborted(turn.signal);
        await Promise.all([
          turn.tool('spins', {}, (token) => pool.run({ flags: f }, { token, name: 'spins' })),
          turn.tool('sh', {}, (token) => exec('sh', ['-c', `echo $$ > ${pidFile}; trap '' TERM; while :; do sleep 1; done`], { token })),
        ]);
      }, { turnId: 't-full' });
      await started(f);
      await eventually(() => existsSync(pidFile) && readFileSync(pidFile, 'utf8').trim() !== '', 5000, 'the shell to start');
      treePid = Number(readFileSync(pidFile, 'utf8'));
      // End the ledger exactly at a page boundary (tmpfs allocates pages), so its next byte needs a new page.
      const seq = (await small.entries()).length + 1;
      const overhead = JSON.stringify({ seq, at: Date.now(), sessionId: 'disk', turnId: 't-full', type: 'say', text: '' }).length + 1;
      let pad = 4096 - (statSync(path).size % 4096);
      if (pad < overhead) pad += 4096;
      await small.append({ sessionId: 'disk', turnId: 't-full', type: 'say', text: 'x'.repeat(pad - overhead) });
      await small.flush();
      expect(statSync(path).size % 4096).toBe(0);
      // Fill the file system to the last byte.
      try { writeFileSync(join(mnt, 'filler'), Buffer.alloc(128 * 1024)); } catch (e) { expect((e as NodeJS.ErrnoException).code).toBe('ENOSPC'); }

      const report = await r.stop('disk');
      const outcome = await outcome$;
      expect((report!.ledgerError as NodeJS.ErrnoException & { cause?: NodeJS.ErrnoException }).cause?.code).toBe('ENOSPC');
      expect(String((report!.ledgerError as Error).message)).toMatch(/disk is full/);
      expect(outcome).toMatchObject({ status: 'cancelled', report });
      expect(await stream).toBe('aborted');
      expect(report!.hardStopped).toMatchObject({ workers: 1, processGroups: 1 });
      expect(isGone(treePid)).toBe(true);
      await small.close().catch(() => {});

      // Full: the open turn cannot be closed, and the error says why and what to do.
      const opening = Ledger.open(path);
      await expect(opening).rejects.toThrow(/disk is full \(ENOSPC; \d+ bytes free on the file system holding/);
      await expect(opening).rejects.toThrow(/Free space there/);
      rmSync(join(mnt, 'filler'));
      const reopened = await Ledger.open(path);
      try {
        const entries = await reopened.entries({ turnId: 't-full' });
        expect(entries.at(-1)).toMatchObject({ type: 'status' });
        expect(['interrupted', 'cancelled']).toContain((entries.at(-1) as { status: string }).status);
        const calls = entries.filter((e) => e.type === 'tool_call').map((e) => (e as { callId: string }).callId);
        const closed = entries.filter((e) => e.type === 'tool_output' || e.type === 'tool_aborted').map((e) => (e as { callId: string }).callId);
        expect(closed.sort()).toEqual(calls.sort());
      } finally {
        await reopened.close();
      }
    });
  });
});

describe('any cancel of the turn token is a stop under the runner\'s grace', () => {
  it('registry.markCancelled: the pool\'s own 50 ms timer does not hard-stop first; the runner\'s grace does, and the report counts it', async () => {
    const f = flags();
    let rejectedAt = 0;
    const outcome$ = runner.run('s', (turn) => turn.tool('spins', {}, (token) => pool.run({ flags: f }, { token, name: 'spins' }))
      .catch((e) => { rejectedAt = performance.now(); throw e; }));
    await started(f);
    const t0 = performance.now();
    const r = new TurnRunner({ registry, pool, ledger }); // a second runner sharing the registry changes nothing
    void r;
    registry.markCancelled('s');
    const outcome = await outcome$;
    expect(outcome.status).toBe('cancelled');
    expect(rejectedAt - t0).toBeGreaterThanOrEqual(95);
    expect(outcome.report).toMatchObject({ reason: 'cancel.session', settledCooperatively: false, hardStopped: { workers: 1 } });
    expect(outcome.report!.settledAt).toBeGreaterThanOrEqual(95);
  });

  it('cancelTurn() in a worker: the same', async () => {
    const f = flags();
    let rejectedAt = 0;
    const runner600 = new TurnRunner({ registry, pool, ledger, graceMs: 600 });
    const t0 = performance.now();
    const outcome = await runner600.run('s', (turn) => turn.tool('trips', {}, (token) => pool.run({ flags: f }, { token, name: 'cancelsTurnThenSpins' }))
      .catch((e) => { rejectedAt = performance.now(); throw e; }));
    expect(outcome.status).toBe('cancelled');
    expect(rejectedAt - t0).toBeGreaterThanOrEqual(595);
    expect(outcome.report).toMatchObject({ graceMs: 600, settledCooperatively: false, hardStopped: { workers: 1 } });
  });

  it('the abort of a caller\'s signal given to run(): the same, with the signal\'s reason', async () => {
    const f = flags();
    const caller = new AbortController();
    let rejectedAt = 0;
    const outcome$ = runner.run('s', (turn) => turn.tool('spins', {}, (token) => pool.run({ flags: f }, { token, name: 'spins' }))
      .catch((e) => { rejectedAt = performance.now(); throw e; }), { signal: caller.signal });
    await started(f);
    const t0 = performance.now();
    caller.abort('client went away');
    const outcome = await outcome$;
    expect(outcome.status).toBe('cancelled');
    expect(rejectedAt - t0).toBeGreaterThanOrEqual(95);
    expect(outcome.report).toMatchObject({ reason: 'client went away', settledCooperatively: false, hardStopped: { workers: 1 } });
  });

  it('an already aborted signal given to run() stops the turn before its body starts', async () => {
    let bodyRan = false;
    const outcome = await runner.run('s', async () => { bodyRan = true; }, { signal: AbortSignal.abort('gone') });
    expect(bodyRan).toBe(false);
    expect(outcome).toMatchObject({ status: 'cancelled', report: { reason: 'gone' } });
    await expect(runner.run('s', async () => 1, { signal: 'nope' } as never)).rejects.toThrow(/options\.signal: expected an AbortSignal/);
  });

  it('a worker hard-stopped by the pool\'s own timer during the stop (its call was cancelled alone just before) is counted and the stop is not cooperative', async () => {
    const f = flags();
    const controller = new AbortController();
    const outcome$ = runner.run('s', (turn) => turn.tool('spins', {}, (token) => pool.run({ flags: f }, { token, signal: controller.signal, name: 'spins', graceMs: 50 })));
    await started(f);
    controller.abort('this call only');
    const report = await runner.stop('s', { graceMs: 2000 });
    expect(report).toMatchObject({ settledCooperatively: false, hardStopped: { workers: 1 } });
    expect(report!.settledAt).toBeLessThan(1500); // the grace ended when the pool's timer settled the task
    expect((await outcome$).status).toBe('cancelled');
  });

  it('a reason String() cannot render (a second time) still stops the turn, with a safe rendering as the reason', async () => {
    const f = flags();
    const outcome$ = runner.run('s', (turn) => turn.tool('spins', {}, (token) => pool.run({ flags: f }, { token, name: 'spins' })));
    await started(f);
    // The token renders it once for its signal's reason; every later rendering throws.
    let renders = 0;
    const hostile = { toString() { if (renders++ === 0) return 'first'; throw new Error('no second rendering'); } };
    registry.markCancelled('s', hostile);
    const outcome = await outcome$;
    expect(outcome.status).toBe('cancelled');
    expect(outcome.report!.reason).toBe('[object Object]');
    expect(lines(ledger.path).filter((e) => e.type === 'status').map((e) => (e as { reason?: string }).reason)).toEqual(['[object Object]', '[object Object]']);
  });
});

describe('nothing of a turn starts after its stop began', () => {
  it('stop() right after run(): the body never starts', async () => {
    let bodyRan = false;
    const outcome$ = runner.run('s', async (turn) => {
      bodyRan = true;
      await turn.tool('touch', {}, () => exec('touch', [join(dir, 'touched')]));
    }, { turnId: 't-early' });
    const report = await runner.stop('s');
    const outcome = await outcome$;
    expect(bodyRan).toBe(false);
    expect(existsSync(join(dir, 'touched'))).toBe(false);
    expect(outcome).toMatchObject({ status: 'cancelled', report });
    expect(report).toMatchObject({ settledCooperatively: true, bodyAbandoned: false });
    expect(lines(ledger.path).map(typeOf)).toEqual(['turn_started', 'status:cancelling', 'turn_aborted', 'status:cancelled']);
  });

  it('while `cancelling` is being fsynced, tool/ask/say reject with CancelledError and run or record nothing', async () => {
    const proto = Object.getPrototypeOf(await open(join(dir, 'probe'), 'w').then(async (h) => { await h.close(); return h; })) as FileHandle;
    const datasync = proto.datasync;
    let syncing!: () => void;
    const inSync = new Promise<void>((r) => { syncing = r; });
    let letSyncGo!: () => void;
    const syncGate = new Promise<void>((r) => { letSyncGo = r; });
    let proceed!: () => void;
    const bodyGate = new Promise<void>((r) => { proceed = r; });
    let tried!: (r: PromiseSettledResult<unknown>[]) => void;
    const attempts = new Promise<PromiseSettledResult<unknown>[]>((r) => { tried = r; });
    let toolRan = false;
    let running!: () => void;
    const bodyRuns = new Promise<void>((r) => { running = r; });
    const outcome$ = runner.run('s', async (turn) => {
      running();
      await bodyGate;
      tried(await Promise.allSettled([
        turn.tool('touch', {}, async () => { toolRan = true; }), turn.ask('sure?'), turn.say('more'),
      ]));
    });
    await bodyRuns;
    vi.spyOn(proto, 'datasync').mockImplementation(async function (this: FileHandle) {
      syncing();
      await syncGate;
      return datasync.call(this);
    });
    const report$ = runner.stop('s');
    await inSync; // the stop is inside its intent's fdatasync; the token is not tripped yet
    proceed();
    const results = await attempts;
    letSyncGo();
    await report$;
    await outcome$;
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected', 'rejected']);
    for (const r of results) expect(isCancelledError((r as PromiseRejectedResult).reason)).toBe(true);
    expect(toolRan).toBe(false);
    expect(lines(ledger.path).map(typeOf)).toEqual(['turn_started', 'status:cancelling', 'turn_aborted', 'status:cancelled']);
  });
});

describe('bad options are refused and change nothing', () => {
  it.each([
    ['null options', null, TypeError, /^options: expected an object/],
    ['a registry that is not one', { registry: {} }, TypeError, /options\.registry: expected a TurnRegistry/],
    ['a pool that is not a TurnPool', { pool: { run() {} } }, TypeError, /options\.pool: expected a TurnPool/],
    ['a ledger that is a path', { ledger: 'history.jsonl' }, TypeError, /options\.ledger: expected a Ledger/],
    ['a grace in a string', { graceMs: '100' }, TypeError, /options\.graceMs: expected a number/],
    ['a grace past the longest timer', { graceMs: 2 ** 31 }, RangeError, /options\.graceMs: .*2147483647/],
    ['a NaN grace', { graceMs: Number.NaN }, RangeError, /options\.graceMs/],
  ])('new TurnRunner with %s', (_label, options, type, message) => {
    expect(() => new TurnRunner(options as never)).toThrow(type);
    expect(() => new TurnRunner(options as never)).toThrow(message);
  });

  it('run() with bad options rejects before beginning a turn or writing anything', async () => {
    await expect(runner.run('s', async () => 1, null as never)).rejects.toThrow(/^options: expected an object/);
    await expect(runner.run('s', async () => 1, 'turn-1' as never)).rejects.toThrow(TypeError);
    await expect(runner.run('s', async () => 1, { turnId: 7 } as never)).rejects.toThrow(/options\.turnId: expected a non-empty string/);
    expect(registry.stats().liveTokens).toBe(0);
    expect(readFileSync(ledger.path, 'utf8')).toBe('');
    expect((await runner.run('s', async () => 1)).status).toBe('completed');
  });

  it('stop() with bad options throws and leaves the running turn untouched', async () => {
    let release!: (v: string) => void;
    let running!: () => void;
    const bodyRuns = new Promise<void>((r) => { running = r; });
    const outcome$ = runner.run('s', (turn) => new Promise<string>((r) => { release = r; running(); void turn; }));
    await bodyRuns;
    expect(() => runner.stop('s', { graceMs: 2 ** 31 })).toThrow(RangeError);
    expect(() => runner.stop('s', { graceMs: 2 ** 31 })).toThrow(/options\.graceMs/);
    expect(() => runner.stop('s', null as never)).toThrow(/^options: expected an object/);
    expect(() => runner.stop('s', { reason: '' })).toThrow(/options\.reason/);
    expect(() => runner.stop('s', { reason: 5 } as never)).toThrow(TypeError);
    expect(registry.isCancelled('s')).toBe(false);
    release('done');
    expect(await outcome$).toMatchObject({ status: 'completed', value: 'done' });
    expect(lines(ledger.path).map(typeOf)).toEqual(['turn_started', 'status:completed']);
  });
});

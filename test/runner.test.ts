import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawn } from 'node:child_process';
import {
  CancelledError, FatalToolError, Ledger, exec, ToolError, TurnPool, TurnRegistry, TurnRunner, isCancelledError,
  type LedgerEntry,
} from '../dist/src/index.js';
import { spyOnFdatasync } from './support/fdatasync-spy.js';
import { flags, started } from './support/handshake.js';
import { fileHandlePrototype } from './support/file-handle.js';

const tasks = new URL('./fixtures/pool/tasks.mjs', import.meta.url).href;
const registry = new TurnRegistry();
const pool = new TurnPool({ filename: tasks, minThreads: 1, maxThreads: 2 });
let dir: string;
let ledger: Ledger;
let runner: TurnRunner;
let events: { name: string; payload: any }[];

const EVENTS = ['turn_started', 'question', 'tool_output', 'say', 'turn_completed', 'turn_failed', 'turn_aborted'];

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'fullstop-runner-'));
  ledger = await Ledger.open(join(dir, 'history.jsonl'));
  runner = new TurnRunner({ registry, pool, ledger, graceMs: 100 });
  events = [];
  for (const name of EVENTS) runner.on(name, (payload) => events.push({ name, payload }));
});

afterEach(async () => {
  vi.restoreAllMocks();
  await ledger.close();
  rmSync(dir, { recursive: true, force: true });
  expect(registry.stats()).toEqual({ liveTokens: 0, liveSlots: 0, liveBridges: 0, liveOwners: 0 });
});

afterAll(() => pool.destroy());

function onDisk(): LedgerEntry[] {
  return readFileSync(ledger.path, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
}

function named(name: string) {
  return events.filter((e) => e.name === name);
}

describe('a completed turn', () => {
  it('writes its entries in order, and entries() equals the file', async () => {
    const outcome = await runner.run('s', async (turn) => {
      await turn.say('hello');
      const r = await turn.tool('echo', { value: 1 }, (token) => pool.run({ value: 1 }, { token, name: 'echo' }));
      return (r as { value: number }).value + 1;
    }, { turnId: 't1' });
    expect(outcome).toMatchObject({ status: 'completed', turnId: 't1', value: 2 });
    const types = onDisk().map((e) => (e.type === 'status' ? `status:${e.status}` : e.type));
    expect(types).toEqual(['turn_started', 'say', 'tool_call', 'tool_output', 'status:completed']);
    expect(await ledger.entries()).toEqual(onDisk());
    expect(onDisk().map((e) => e.seq)).toEqual([1, 2, 3, 4, 5]);
    expect(named('turn_completed')).toHaveLength(1);
    expect(named('turn_aborted')).toHaveLength(0);
  });
});

describe('a stop during a pool task', () => {
  it('follows the stop order as the file system saw it: intent written and synced before the signal, marker written and synced before the event, and the report\'s times agree', async () => {
    const f = flags();
    const log: { what: string; at: number }[] = [];
    const proto = await fileHandlePrototype();
    const write = proto.write;
    // What the file system saw: each line is logged when it is first found in the file — after an
    // asynchronous write, before each sync (a flush may write the lines itself, synchronously), at
    // the signal and at the event.
    let seenBytes = 0;
    const logNewLines = () => {
      const text = readFileSync(ledger.path, 'utf8');
      for (const line of text.slice(seenBytes).split('\n').filter(Boolean)) {
        const e = JSON.parse(line) as { type: string; status?: string };
        log.push({ what: `write ${e.type === 'status' ? `status:${e.status}` : e.type}`, at: performance.now() });
      }
      seenBytes = text.lastIndexOf('\n') + 1;
    };
    vi.spyOn(proto, 'write').mockImplementation(async function (this: FileHandle, ...args: unknown[]) {
      const result: unknown = await (write as (...a: unknown[]) => Promise<unknown>).apply(this, args);
      logNewLines();
      return result;
    } as never);
    spyOnFdatasync(logNewLines, () => { log.push({ what: 'synced', at: performance.now() }); });
    runner.once('turn_aborted', () => { logNewLines(); log.push({ what: 'event', at: performance.now() }); });
    const outcome$ = runner.run('s', async (turn) => {
      turn.signal.addEventListener('abort', () => { logNewLines(); log.push({ what: 'signal', at: performance.now() }); });
      const done = await turn.tool('finished', { value: 'real' }, (token) => pool.run({ value: 'real' }, { token, name: 'echo' }));
      await turn.tool('sleeps', { ms: 60_000 }, (token) => pool.run({ flags: f, ms: 60_000 }, { token, name: 'sleeper' }));
      return done;
    }, { turnId: 't1' });
    await started(f);
    logNewLines();
    const stopAt = performance.now();
    log.length = 0;
    const report = await runner.stop('s');
    const outcome = await outcome$;

    expect(log.map((l) => l.what)).toEqual([
      'write status:cancelling', 'synced', 'signal',
      'write tool_aborted', 'write turn_aborted', 'write status:cancelled', 'synced', 'event',
    ]);
    const at = (what: string, nth = 0) => log.filter((l) => l.what === what)[nth]!.at - stopAt;
    const r = report!;
    // Each time of the report lies between the observations around it. stopAt precedes the stop's own
    // t0 by `offset` (microseconds, more on a loaded machine); the 'event' seen after emittedAt bounds it.
    const offset = at('event') - r.emittedAt;
    expect(at('signal')).toBeLessThanOrEqual(r.signalledAt + offset);
    expect(at('synced', 0)).toBeLessThanOrEqual(r.signalledAt + offset);
    expect(at('write turn_aborted')).toBeGreaterThanOrEqual(r.hardStopAt - 1);
    expect(at('write turn_aborted')).toBeLessThanOrEqual(r.markerAt + offset);
    expect(at('synced', 1)).toBeGreaterThanOrEqual(r.markerAt - 1);
    expect(at('synced', 1)).toBeLessThanOrEqual(r.flushedAt + offset);
    expect(at('event')).toBeGreaterThanOrEqual(r.emittedAt - 1);
    expect(outcome.status).toBe('cancelled');
    expect(outcome.report).toEqual(report);
    expect(r).toMatchObject({ sessionId: 's', turnId: 't1', reason: 'cancel.user', graceMs: 100, settledCooperatively: true, bodyAbandoned: false, ledgerError: undefined });
    expect(r.hardStopped).toEqual({ workers: 0, processGroups: 0, questions: 0 });

    const entries = onDisk();
    const statuses = entries.filter((e) => e.type === 'status').map((e) => (e as { status: string }).status);
    expect(statuses).toEqual(['cancelling', 'cancelled']);
    const outputs = entries.filter((e) => e.type === 'tool_output');
    expect(outputs).toHaveLength(1);
    expect(outputs[0]).toMatchObject({ callId: 'call-1', success: true, output: { value: 'real' } });
    const aborted = entries.filter((e) => e.type === 'tool_aborted');
    expect(aborted).toHaveLength(1);
    expect(aborted[0]).toMatchObject({ callId: 'call-2' });
    const seconds = Number(/^aborted by user after (\d+\.\d)s$/.exec((aborted[0] as { output: string }).output)![1]);
    expect(seconds).toBeGreaterThanOrEqual(0.1);
    expect(named('turn_aborted')).toHaveLength(1);
    expect(named('turn_aborted')[0]!.payload).toMatchObject({ sessionId: 's', turnId: 't1', report: r });
    expect(named('turn_failed')).toHaveLength(0);
  });

  it('hard-stops a task that does not listen after the stop\'s grace and counts the worker', async () => {
    const f = flags();
    const outcome$ = runner.run('s', (turn) => turn.tool('stubborn', {}, (token) => pool.run({ flags: f }, { token, name: 'neverChecks' })));
    await started(f);
    const t0 = performance.now();
    const report = await runner.stop('s', { graceMs: 150 });
    expect(performance.now() - t0).toBeGreaterThanOrEqual(145);
    expect(report).toMatchObject({ settledCooperatively: false, graceMs: 150, hardStopped: { workers: 1, processGroups: 0, questions: 0 } });
    expect((await outcome$).status).toBe('cancelled');
  });
});

describe('a body that ignores the stop', () => {
  it('is waited for through the whole grace, reported abandoned and not cooperative; its later tool/ask/say are refused and nothing of it is recorded', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => { release = r; });
    let finished!: (results: PromiseSettledResult<unknown>[]) => void;
    const late = new Promise<PromiseSettledResult<unknown>[]>((r) => { finished = r; });
    let toolRan = false;
    let running!: () => void;
    const bodyRuns = new Promise<void>((r) => { running = r; });
    const outcome$ = runner.run('s', async (turn) => {
      running();
      await gate; // does not listen to turn.signal
      finished(await Promise.allSettled([
        turn.say('too late'), turn.tool('late', {}, async () => { toolRan = true; return 1; }), turn.ask('still there?'),
      ]));
      return 'late value';
    });
    await bodyRuns;
    const t0 = performance.now();
    const report = await runner.stop('s', { graceMs: 300 });
    expect(performance.now() - t0).toBeGreaterThanOrEqual(295);
    expect(report).toMatchObject({ settledCooperatively: false, bodyAbandoned: true, hardStopped: { workers: 0, processGroups: 0, questions: 0 } });
    expect(report!.settledAt).toBeGreaterThanOrEqual(295);
    const outcome = await outcome$;
    expect(outcome.status).toBe('cancelled');
    const before = readFileSync(ledger.path, 'utf8');
    const eventsBefore = events.length;
    release();
    const results = await late;
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected', 'rejected']);
    for (const r of results) expect(isCancelledError((r as PromiseRejectedResult).reason)).toBe(true);
    expect(toolRan).toBe(false);
    expect(readFileSync(ledger.path, 'utf8')).toBe(before);
    expect(events.length).toBe(eventsBefore);
    expect(named('turn_aborted')).toHaveLength(1);
    expect(named('turn_completed')).toHaveLength(0);
  });

  it('one that unwinds on the signal ends the grace at once and is cooperative', async () => {
    let running!: () => void;
    const bodyRuns = new Promise<void>((r) => { running = r; });
    const outcome$ = runner.run('s', (turn) => new Promise((_, reject) => {
      turn.signal.addEventListener('abort', () => reject(turn.signal.reason));
      running();
    }));
    await bodyRuns;
    const t0 = performance.now();
    const report = await runner.stop('s', { graceMs: 5000 });
    expect(performance.now() - t0).toBeLessThan(2000);
    expect(report).toMatchObject({ settledCooperatively: true, bodyAbandoned: false });
    expect((await outcome$).status).toBe('cancelled');
  });
});

describe('abandoned work', () => {
  it('a tool whose fn never settles leaves nothing counted once the stopped turn ends', async () => {
    let running!: () => void;
    const toolRuns = new Promise<void>((r) => { running = r; });
    const outcome$ = runner.run('s', (turn) => turn.tool('forever', {}, () => { running(); return new Promise(() => {}); }));
    await toolRuns;
    const report = await runner.stop('s', { graceMs: 20 });
    expect(report!.settledCooperatively).toBe(false);
    expect((await outcome$).status).toBe('cancelled');
    expect(onDisk().filter((e) => e.type === 'tool_aborted')).toHaveLength(1);
  });

  it('a question never awaited is withdrawn when the turn completes', async () => {
    let questionId = '';
    runner.once('question', (p) => { questionId = p.questionId; });
    const outcome = await runner.run('s', async (turn) => { void turn.ask('ignored?'); return 'done'; });
    expect(outcome.status).toBe('completed');
    expect(runner.answer(questionId, 'late')).toEqual({ outcome: 'not_found', questionId });
  });
});

describe('stop', () => {
  it('between turns returns null and writes nothing', async () => {
    expect(await runner.stop('nobody')).toBeNull();
    await runner.run('s', async () => 1);
    const before = readFileSync(ledger.path, 'utf8');
    expect(await runner.stop('s')).toBeNull();
    expect(readFileSync(ledger.path, 'utf8')).toBe(before);
  });

  it('repeated joins the first and does not reset the grace window', async () => {
    const f = flags();
    const outcome$ = runner.run('s', (turn) => turn.tool('stubborn', {}, (token) => pool.run({ flags: f }, { token, name: 'neverChecks' })));
    await started(f);
    const t0 = performance.now();
    const first = runner.stop('s', { graceMs: 600 });
    await new Promise((r) => setImmediate(r)); // the first stop is under way
    // A repeat with a grace of its own: were the window reset or replaced by it, the hard stop
    // would come a minute later.
    const second = runner.stop('s', { graceMs: 60_000 });
    expect(second).toBe(first);
    const [a, b] = await Promise.all([first, second]);
    expect(a).toBe(b);
    expect(a!.graceMs).toBe(600);
    expect(a!.hardStopAt).toBeGreaterThanOrEqual(595);
    expect(a!.hardStopAt).toBeLessThan(30_000);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(595);
    await outcome$;
    expect(onDisk().filter((e) => e.type === 'status' && e.status === 'cancelling')).toHaveLength(1);
  });

  it('of a paused turn wakes it and leaves the registry paused', async () => {
    const f = flags();
    const outcome$ = runner.run('s', (turn) => turn.tool('phases', {}, (token) => pool.run({ flags: f }, { token, name: 'phases' })));
    await started(f);
    runner.pause();
    try {
      const report = await runner.stop('s', { graceMs: 1000 });
      expect(report!.settledCooperatively).toBe(true);
      expect(runner.paused).toBe(true);
    } finally {
      runner.resume();
    }
    expect((await outcome$).status).toBe('cancelled');
  });
});

describe('a runner without a ledger', () => {
  it('joins the stop under way when an abort listener stops the turn again', async () => {
    const bare = new TurnRunner({ registry, graceMs: 100 });
    let release!: () => void;
    const held = new Promise<void>((r) => { release = r; });
    let again: Promise<unknown> | undefined;
    const outcome$ = bare.run('bare', async (turn) => {
      // A listener of the turn's signal that stops the turn once more, as a UI handler might.
      turn.signal.addEventListener('abort', () => { again = bare.stop('bare'); });
      release();
      await new Promise((r) => turn.signal.addEventListener('abort', r));
    });
    await held;
    const first = bare.stop('bare');
    const report = await first;
    expect(again).toBe(first);
    expect(report).not.toBeNull();
    expect((await outcome$).status).toBe('cancelled');
  });
});

describe('questions', () => {
  it('an answer is taken once', async () => {
    runner.once('question', ({ questionId }) => {
      expect(runner.answer(questionId, 'yes')).toEqual({ outcome: 'accepted', questionId, node: 'local' });
      expect(runner.answer(questionId, 'again')).toEqual({ outcome: 'already_answered', questionId });
    });
    const outcome = await runner.run('s', (turn) => turn.ask('continue?'));
    expect(outcome).toMatchObject({ status: 'completed', value: 'yes' });
  });

  it('a pending question is rejected by a stop and a late answer is refused', async () => {
    let asked!: (id: string) => void;
    const questionId = new Promise<string>((r) => { asked = r; });
    runner.once('question', (p) => asked(p.questionId));
    let rejection: unknown;
    const outcome$ = runner.run('s', async (turn) => {
      try { await turn.ask('continue?'); } catch (e) { rejection = e; throw e; }
    });
    const id = await questionId;
    const report = await runner.stop('s');
    await outcome$;
    expect(isCancelledError(rejection)).toBe(true);
    expect(report!.hardStopped.questions).toBe(1);
    expect(runner.answer(id, 'late')).toEqual({ outcome: 'not_found', questionId: id });
  });
});

describe('a body waiting on a question', () => {
  it('is not waited for during the grace; one that unwinds on the rejection is cooperative, one that ignores it too is abandoned', async () => {
    const asked = () => new Promise<void>((r) => runner.once('question', () => r()));
    let q = asked();
    const unwinds = runner.run('s', (turn) => turn.ask('continue?'));
    await q;
    const t0 = performance.now();
    const first = await runner.stop('s', { graceMs: 5000 });
    expect(performance.now() - t0).toBeLessThan(2000);
    expect(first).toMatchObject({ settledCooperatively: true, bodyAbandoned: false, hardStopped: { questions: 1 } });
    expect((await unwinds).status).toBe('cancelled');

    q = asked();
    const ignores = runner.run('s', async (turn) => { await turn.ask('continue?').catch(() => {}); await new Promise(() => {}); });
    await q;
    const second = await runner.stop('s', { graceMs: 5000 });
    expect(second).toMatchObject({ settledCooperatively: false, bodyAbandoned: true, hardStopped: { questions: 1 } });
    expect((await ignores).status).toBe('cancelled');
  });
});

describe('tool failures', () => {
  it('a ToolError goes back as an output and the turn goes on', async () => {
    let thrown: unknown = 'nothing was thrown';
    const outcome = await runner.run('s', async (turn) => {
      await turn.tool('bad', {}, async () => { throw new ToolError('no such file: x'); }).catch((e: unknown) => { thrown = e; });
      return 'went on';
    });
    expect(thrown).toBeInstanceOf(ToolError);
    expect(outcome).toMatchObject({ status: 'completed', value: 'went on' });
    expect(onDisk().find((e) => e.type === 'tool_output')).toMatchObject({ success: false, output: 'no such file: x' });
  });

  it('a non-zero exit goes back as an output, with the ambient token binding the child', async () => {
    const outcome = await runner.run('s', (turn) => turn.tool('sh', { code: 3 }, async () => exec('sh', ['-c', 'echo out; exit 3'])));
    expect(outcome.status).toBe('completed');
    const output = onDisk().find((e) => e.type === 'tool_output') as { success: boolean; output: { exitCode: number; stdout: string } };
    expect(output.success).toBe(true);
    expect(output.output).toMatchObject({ exitCode: 3, stdout: 'out\n' });
  });

  it('a FatalToolError fails the turn', async () => {
    const outcome = await runner.run('s', (turn) => turn.tool('fatal', {}, async () => { throw new FatalToolError('disk gone'); }));
    expect(outcome.status).toBe('failed');
    expect(outcome.error).toBeInstanceOf(FatalToolError);
    expect(named('turn_failed')).toHaveLength(1);
    const status = onDisk().filter((e) => e.type === 'status').map((e) => (e as { status: string }).status);
    expect(status).toEqual(['failed']);
  });
});

describe('the next turn after a stop', () => {
  it('starts clean and its history shows the marker', async () => {
    const f = flags();
    const first$ = runner.run('s', (turn) => turn.tool('sleeps', {}, (token) => pool.run({ flags: f, ms: 60_000 }, { token, name: 'sleeper' })));
    await started(f);
    await runner.stop('s');
    await first$;
    const outcome = await runner.run('s', async (turn) => {
      expect(turn.token.isCancelled()).toBe(false);
      return turn.tool('echo', { value: 2 }, (token) => pool.run({ value: 2 }, { token, name: 'echo' }));
    });
    expect(outcome.status).toBe('completed');
    const history = await ledger.entries({ sessionId: 's' });
    expect(history.some((e) => e.type === 'turn_aborted')).toBe(true);
    expect(history.at(-1)).toMatchObject({ type: 'status', status: 'completed', turnId: outcome.turnId });
  });
});

describe('a cancel from elsewhere', () => {
  it('runs the same stop sequence (registry.markCancelled)', async () => {
    const f = flags();
    const outcome$ = runner.run('s', (turn) => turn.tool('sleeps', {}, (token) => pool.run({ flags: f, ms: 60_000 }, { token, name: 'sleeper' })));
    await started(f);
    registry.markCancelled('s');
    const outcome = await outcome$;
    expect(outcome.status).toBe('cancelled');
    expect(outcome.report!.reason).toBe('cancel.session');
    expect(onDisk().some((e) => e.type === 'turn_aborted')).toBe(true);
  });
});

describe('a host SIGKILLed mid-turn', () => {
  it('leaves a ledger that reopens with the turn interrupted', async () => {
    const path = join(dir, 'host.jsonl');
    const child = spawn(process.execPath, [new URL('./fixtures/runner/host-killed-mid-turn.mjs', import.meta.url).pathname, path], { stdio: ['ignore', 'pipe', 'inherit'] });
    await new Promise<void>((resolve, reject) => {
      child.stdout!.on('data', (d) => { if (String(d).includes('ready')) resolve(); });
      child.once('exit', (code) => reject(new Error(`host exited early (${code})`)));
    });
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    await exited;
    const reopened = await Ledger.open(path);
    try {
      const entries = await reopened.entries({ turnId: 'doomed' });
      expect(entries.map((e) => e.type)).toEqual(['turn_started', 'say', 'tool_call', 'tool_aborted', 'status']);
      expect(entries.at(-1)).toMatchObject({ status: 'interrupted' });
    } finally {
      await reopened.close();
    }
  });
});

describe('bad input', () => {
  it('throws TypeError for an empty session id or a body that is not a function, RangeError for a negative grace', async () => {
    await expect(runner.run('', async () => 1)).rejects.toThrow(TypeError);
    await expect(runner.run('s', 'nope' as never)).rejects.toThrow(/body: expected a function/);
    expect(() => runner.stop('s', { graceMs: -1 })).toThrow(RangeError);
    expect(() => new TurnRunner({ graceMs: -1 })).toThrow(RangeError);
    expect(() => runner.answer('', 1)).toThrow(TypeError);
    expect(readFileSync(ledger.path, 'utf8')).toBe('');
  });

  it('a call id or question id longer than MAX_ID_LENGTH (1 MB here) is a RangeError naming it; nothing of it is kept or written', async () => {
    const huge = 'c'.repeat(1_000_000);
    let ran = false;
    const outcome = await runner.run('s', async (turn) => {
      const refused = await turn.tool('t', {}, async () => { ran = true; }, { callId: huge }).then(() => undefined, (e: unknown) => e);
      let question: string | undefined;
      runner.once('question', (p) => { question = p.questionId; });
      const asked = turn.ask('ok?');
      const answerHuge = () => runner.answer(huge, 'yes');
      expect(answerHuge).toThrow(RangeError);
      expect(answerHuge).toThrow(/^questionId/);
      expect(runner.answer(question!, 'yes')).toMatchObject({ outcome: 'accepted' }); // the real question is still pending, answerable once
      await asked;
      return refused;
    }, { turnId: 'ids' });
    expect(outcome.status === 'completed' && outcome.value).toBeInstanceOf(RangeError);
    expect(outcome.status === 'completed' && (outcome.value as Error).message).toMatch(/^options\.callId/);
    expect(ran).toBe(false);
    expect(onDisk().map((e) => e.type)).toEqual(['turn_started', 'status']);
    expect(readFileSync(ledger.path, 'utf8')).not.toContain('ccc');
  });

  it('refuses a second run of a session that has a running turn', async () => {
    let release!: () => void;
    let running!: () => void;
    const bodyRuns = new Promise<void>((r) => { running = r; });
    const first = runner.run('s', () => new Promise<void>((r) => { release = r; running(); }));
    await bodyRuns;
    await expect(runner.run('s', async () => 1)).rejects.toThrow(/already has a running turn/);
    release();
    expect((await first).status).toBe('completed');
  });
});

describe('CancelledError of a stopped turn', () => {
  it('is what the outcome carries', async () => {
    let listening!: () => void;
    const bodyListens = new Promise<void>((r) => { listening = r; });
    let bodySaw: unknown;
    const outcome$ = runner.run('s', (turn) => new Promise((_, reject) => {
      turn.signal.addEventListener('abort', () => { bodySaw = turn.signal.reason; reject(turn.signal.reason); });
      listening();
    }));
    await bodyListens;
    await runner.stop('s');
    const outcome = await outcome$;
    expect(outcome.error).toBeInstanceOf(CancelledError);
    expect(outcome.error).toMatchObject({ sessionId: 's', turnId: outcome.turnId, reason: 'cancel.user' });
    expect(bodySaw).toBeInstanceOf(CancelledError);
  });
});

/**
 * What the history says of a turn's input and its tool calls: the user's message, the model's own
 * call ids, the `tool_call` event, and the rule that a call cut by a stop is never a success.
 */
import { describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { exec, LEDGER_MAX_LINE_BYTES, TurnRunner } from '../dist/src/index.js';
import { flags, started } from './support/handshake.js';
import { isGone } from './support/leaks.js';
import { runnerScene } from './support/runner-scene.js';

const scene = runnerScene('fullstop-calls-', { tasks: new URL('./fixtures/pool/tasks.mjs', import.meta.url), graceMs: 2000, maxThreads: 1 });
const { pool } = scene;
const onDisk = () => scene.onDisk();

describe('run\'s input', () => {
  it('is recorded on turn_started and given to its event', async () => {
    const seen: unknown[] = [];
    scene.runner.on('turn_started', (p) => seen.push(p.input));
    await scene.runner.run('s', async () => 1, { input: { role: 'user', text: 'build it' } });
    await scene.runner.run('s', async () => 1);
    expect(onDisk().filter((e) => e.type === 'turn_started').map((e) => (e as { input?: unknown }).input))
      .toEqual([{ role: 'user', text: 'build it' }, undefined]);
    expect(seen).toEqual([{ role: 'user', text: 'build it' }, undefined]);
  });

  it('that JSON cannot encode is a TypeError naming it, and nothing starts', async () => {
    await expect(scene.runner.run('s', async () => 1, { input: 10n })).rejects.toThrow(/options\.input/);
    expect(onDisk()).toEqual([]);
  });
});

describe('a tool call\'s id', () => {
  it('is the caller\'s callId when given; generated ids never repeat one', async () => {
    await scene.runner.run('s', async (turn) => {
      await turn.tool('a', {}, async () => 1, { callId: 'call-2' });
      await turn.tool('b', {}, async () => 2);
      await turn.tool('c', {}, async () => 3);
      await turn.tool('d', {}, async () => 4, { callId: 'toolu_01' });
    });
    const ids = onDisk().filter((e) => e.type === 'tool_call').map((e) => (e as { callId: string }).callId);
    expect(ids).toEqual(['call-2', 'call-1', 'call-3', 'toolu_01']);
  });

  it('repeated within the turn is a TypeError naming options.callId, and nothing of that call is recorded', async () => {
    const outcome = await scene.runner.run('s', async (turn) => {
      await turn.tool('a', {}, async () => 1, { callId: 'x' });
      await expect(turn.tool('a', {}, async () => 2, { callId: 'x' })).rejects.toThrow(/options\.callId/);
      await expect(turn.tool('a', {}, async () => 2, { callId: '' })).rejects.toThrow(TypeError);
      return 'went on';
    });
    expect(outcome).toMatchObject({ status: 'completed', value: 'went on' });
    expect(onDisk().filter((e) => e.type === 'tool_call')).toHaveLength(1);
  });
});

describe('the tool_call event', () => {
  it('fires as a call starts, after its entry is recorded, with the call id and name', async () => {
    const seen: unknown[] = [];
    scene.runner.on('tool_call', (p) => {
      const recorded = onDisk().some((e) => e.type === 'tool_call' && e.callId === p.callId);
      seen.push({ ...p, recorded });
    });
    let ranAfterEvent = false;
    await scene.runner.run('s', async (turn) => {
      await turn.tool('grep', { q: 'x' }, async () => { ranAfterEvent = seen.length === 1; return 'ok'; }, { callId: 'c1' });
    }, { turnId: 't' });
    expect(seen).toEqual([{ sessionId: 's', turnId: 't', callId: 'c1', name: 'grep', args: { q: 'x' }, recorded: true }]);
    expect(ranAfterEvent).toBe(true);
  });
});

describe('a call cut by a stop', () => {
  it('an exec that got SIGTERM and exited within the grace is tool_aborted, with what it returned kept as partial', async () => {
    // Handshake: the shell writes to a fifo once its TERM trap is set; reading the fifo waits for that.
    const fifo = join(scene.dir, 'ready');
    execFileSync('mkfifo', [fifo]);
    const outcome = scene.runner.run('s', async (turn) => {
      await turn.tool('build', { target: 'all' }, (token) =>
        exec('sh', ['-c', `echo building; trap "echo cut; exit 143" TERM; echo > ${fifo}; while :; do sleep 0.05; done`], { token }),
      { callId: 'build-1' });
    });
    await readFile(fifo);
    const report = await scene.runner.stop('s');
    expect(report!.settledCooperatively).toBe(true);
    expect((await outcome).status).toBe('cancelled');
    const entries = onDisk();
    expect(entries.some((e) => e.type === 'tool_output')).toBe(false);
    const aborted = entries.find((e) => e.type === 'tool_aborted') as { callId: string; output: string; partial?: { output: { stdout: string; cancelled: boolean; pid: number }; success: boolean } };
    expect(aborted.callId).toBe('build-1');
    expect(aborted.output).toMatch(/^aborted by user after \d+\.\ds$/);
    expect(aborted.partial?.success).toBe(true);
    expect(aborted.partial?.output).toMatchObject({ cancelled: true });
    expect(aborted.partial?.output.stdout).toContain('building');
    expect(isGone(aborted.partial!.output.pid)).toBe(true);
  });

  it('a pool task that caught the cancel and returned is tool_aborted with partial; a call that returned before the signal keeps its output', async () => {
    const f = flags();
    const outcome = scene.runner.run('s', async (turn) => {
      await turn.tool('quick', {}, async () => 'done before', { callId: 'q' });
      await turn.tool('cleans', {}, (token) => pool.run({ flags: f }, { token, name: 'cleansUp' }), { callId: 'c' });
    });
    await started(f);
    await scene.runner.stop('s');
    expect((await outcome).status).toBe('cancelled');
    const entries = onDisk();
    expect(entries.find((e) => e.type === 'tool_output')).toMatchObject({ callId: 'q', output: 'done before', success: true });
    expect(entries.find((e) => e.type === 'tool_aborted')).toMatchObject({ callId: 'c', partial: { success: true } });
    expect(entries.filter((e) => e.type === 'tool_output')).toHaveLength(1);
  });
});

describe('a tool output past maxOutputBytes', () => {
  it('of 64 MB is recorded as its head and tail around an omitted-bytes line; the body and the event get all of it', async () => {
    const size = 64 * 1024 * 1024;
    const big = `FIRST-ERROR ${'x'.repeat(size - 'FIRST-ERROR '.length - ' LAST-LINE'.length)} LAST-LINE`;
    const events: unknown[] = [];
    scene.runner.on('tool_output', (p) => events.push(p.output));
    const outcome = await scene.runner.run('s', async (turn) => {
      const text = await turn.tool('log', {}, async () => big, { callId: 'big' });
      const result = await turn.tool('exec', {}, async () => ({ exitCode: 0, stdout: big }), { callId: 'obj' });
      return [text.length, result.stdout.length];
    });
    expect(outcome).toMatchObject({ status: 'completed', value: [size, size] });
    expect(events.map((o) => (typeof o === 'string' ? o.length : (o as { stdout: string }).stdout.length))).toEqual([size, size]);
    const lines = (await readFile(scene.ledger.path, 'utf8')).split('\n').filter(Boolean);
    expect(Math.max(...lines.map((l) => Buffer.byteLength(l)))).toBeLessThan(scene.runner.maxOutputBytes + 1024);
    const [text, object] = lines.map((l) => JSON.parse(l)).filter((e) => e.type === 'tool_output') as Array<{ output: string; success: boolean }>;
    expect(scene.runner.maxOutputBytes).toBe(1024 * 1024);
    expect(text!.success).toBe(true);
    expect(text!.output.startsWith('FIRST-ERROR xxx')).toBe(true);
    expect(text!.output.endsWith('xxx LAST-LINE')).toBe(true);
    const omitted = Number(/\n… (\d+) bytes omitted …\n/.exec(text!.output)![1]);
    expect(Buffer.byteLength(text!.output.replace(/\n… \d+ bytes omitted …\n/, '')) + omitted).toBe(size);
    // An object is cut as its JSON text: its head and its tail are still there to read.
    expect(object!.output.startsWith('{"exitCode":0,"stdout":"FIRST-ERROR')).toBe(true);
    expect(object!.output.endsWith('LAST-LINE"}')).toBe(true);
    expect(object!.output).toMatch(/\n… \d+ bytes omitted …\n/);
  });

  it('is cut on character boundaries, counting bytes (not UTF-16 units), and a smaller output is recorded whole', async () => {
    const runner = new TurnRunner({ registry: scene.registry, ledger: scene.ledger, maxOutputBytes: 1024 });
    const wide = '€'.repeat(1000); // 3,000 bytes in UTF-8
    await runner.run('s', async (turn) => {
      await turn.tool('wide', {}, async () => wide);
      await turn.tool('small', {}, async () => ({ fits: 'y'.repeat(900) }));
      await turn.tool('fails', {}, async () => { throw new Error('e'.repeat(5000)); }).catch(() => {});
    });
    const [w, small, fails] = onDisk().filter((e) => e.type === 'tool_output') as unknown as Array<{ output: unknown; success: boolean }>;
    expect(w!.output).toBe(`${'€'.repeat(170)}\n… 1980 bytes omitted …\n${'€'.repeat(170)}`);
    expect(small!.output).toEqual({ fits: 'y'.repeat(900) });
    expect(fails).toMatchObject({ success: false });
    expect(Buffer.byteLength(fails!.output as string)).toBeLessThan(1100);
  });

  it('maxOutputBytes is checked like the other options, naming it', () => {
    const { registry } = scene;
    expect(() => new TurnRunner({ registry, maxOutputBytes: '1' as unknown as number })).toThrow(TypeError);
    expect(() => new TurnRunner({ registry, maxOutputBytes: 1023 })).toThrow(RangeError);
    expect(() => new TurnRunner({ registry, maxOutputBytes: 1.5e6 + 0.5 })).toThrow(/options\.maxOutputBytes/);
    expect(() => new TurnRunner({ registry, maxOutputBytes: 2 ** 31 })).toThrow(RangeError);
    expect(new TurnRunner({ registry, maxOutputBytes: 4096 }).maxOutputBytes).toBe(4096);
  });
});

describe('a maxOutputBytes past what a ledger line holds (LEDGER_MAX_LINE_BYTES)', () => {
  /** The ledger's lines as they are on disk: their sizes, and the tool_output entries. */
  async function recorded(): Promise<{ longest: number; outputs: Array<{ output: unknown; success: boolean }> }> {
    const lines = (await readFile(scene.ledger.path, 'utf8')).split('\n').filter(Boolean);
    const longest = Math.max(...lines.map((l) => Buffer.byteLength(l)));
    const outputs = lines.filter((l) => l.includes('"type":"tool_output"')).map((l) => JSON.parse(l) as { output: unknown; success: boolean });
    return { longest, outputs };
  }
  /** Bytes of the whole `text` a recorded cut stands for: those kept and those its line says it left out. */
  function wholeBytesOf(text: string): number {
    const line = /\n… (\d+) bytes omitted …\n/.exec(text);
    expect(line).not.toBeNull();
    return Buffer.byteLength(text.replace(line![0], '')) + Number(line![1]);
  }

  it('keeps a 150 MB return value under maxOutputBytes 256 MiB: the body gets all of it, the history a cut that fits a line', async () => {
    const runner = new TurnRunner({ registry: scene.registry, ledger: scene.ledger, maxOutputBytes: 256 * 1024 * 1024 });
    const size = 150_000_000;
    const outcome = await runner.run('s', async (turn) => {
      const big = `FIRST ${'x'.repeat(size - 'FIRST '.length - ' LAST'.length)} LAST`;
      return (await turn.tool('dump', {}, async () => big)).length;
    });
    expect(outcome).toEqual(expect.objectContaining({ status: 'completed', value: size }));
    expect(outcome).not.toHaveProperty('ledgerError');
    const { longest, outputs } = await recorded();
    expect(longest).toBeLessThanOrEqual(LEDGER_MAX_LINE_BYTES);
    const output = outputs[0]!.output as string;
    expect(outputs[0]!.success).toBe(true);
    expect(output.startsWith('FIRST xxx')).toBe(true);
    expect(output.endsWith('xxx LAST')).toBe(true);
    expect(wholeBytesOf(output)).toBe(size);
  }, 120_000);

  it('keeps a value whose JSON escapes outgrow a line (23 MB of control characters, 6 bytes each in JSON) under maxOutputBytes 32 MiB, as a string and in an object', async () => {
    const runner = new TurnRunner({ registry: scene.registry, ledger: scene.ledger, maxOutputBytes: 32 * 1024 * 1024 });
    const size = 23_000_000;
    const control = '\u0001'.repeat(size);
    const outcome = await runner.run('s', async (turn) => {
      const text = await turn.tool('raw', {}, async () => control);
      const object = await turn.tool('obj', {}, async () => ({ out: control }));
      return [text.length, object.out.length];
    });
    expect(outcome).toEqual(expect.objectContaining({ status: 'completed', value: [size, size] }));
    expect(outcome).not.toHaveProperty('ledgerError');
    const { longest, outputs } = await recorded();
    expect(longest).toBeLessThanOrEqual(LEDGER_MAX_LINE_BYTES);
    expect(outputs.map((o) => o.success)).toEqual([true, true]);
    expect(wholeBytesOf(outputs[0]!.output as string)).toBe(size);
    // An object is cut as its JSON text, whose every character is an escape (`\u0001`, 6 bytes).
    expect((outputs[1]!.output as string).startsWith('{"out":"\\u0001')).toBe(true);
    expect(wholeBytesOf(outputs[1]!.output as string)).toBe(size * 6 + '{"out":""}'.length);
  }, 120_000);
});

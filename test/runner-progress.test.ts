/**
 * Live output (`call.progress`): a tool call reports its output as it happens, the `tool_progress`
 * event carries it, the ledger does not write it line by line, and a call a stop cuts records how
 * far it got on its `tool_aborted` entry.
 */
import { describe, expect, it } from 'vitest';
import { execFile, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { TurnRunner, type LedgerEntry, type ToolCall } from '../dist/src/index.js';
import { MAX_PROGRESS_BYTES } from '../dist/src/constants.js';
import { toModelMessages } from '../dist/src/ai-sdk/index.js';
import { eventually, isGone } from './support/leaks.js';
import { runnerScene } from './support/runner-scene.js';

const scene = runnerScene('fullstop-runner-progress-');
const onDisk = () => scene.onDisk();

type Aborted = { callId: string; output: string; partial?: { output: unknown; success: boolean; progress?: true } };
const abortedEntry = () => onDisk().find((e) => e.type === 'tool_aborted') as unknown as Aborted;

/** A promise and the function that resolves it (a handshake). */
function latch<T = void>(): { promise: Promise<T>; open: (value: T) => void } {
  let open!: (value: T) => void;
  const promise = new Promise<T>((r) => { open = r; });
  return { promise, open };
}

/** test/fixtures/runner/big-progress.mjs in a process of its own: what the runner held (a full GC, then heapUsed, while the turn runs). */
async function heldByProgress(mode: 'one-call' | 'many-calls'): Promise<{ heldMiB: number; reason: string }> {
  const script = fileURLToPath(new URL('./fixtures/runner/big-progress.mjs', import.meta.url));
  const { stdout } = await promisify(execFile)(process.execPath, ['--expose-gc', script, mode], { timeout: 60_000 });
  return JSON.parse(stdout) as { heldMiB: number; reason: string };
}

describe('call.progress', () => {
  it('emits tool_progress with the call\'s ids and the data, and writes nothing of it to the ledger', async () => {
    const events: unknown[] = [];
    scene.runner.on('tool_progress', (p) => events.push(p));
    let seen: ToolCall | undefined;
    const outcome = await scene.runner.run('s', async (turn) => turn.tool('build', {}, async (_token, call) => {
      seen = call;
      call.progress({ stream: 'stdout', text: 'unit 1\n' });
      call.progress({ stream: 'stderr', text: 'warning\n' });
      call.progress({ percent: 50 });
      return 'built';
    }, { callId: 'b1' }), { turnId: 't' });
    expect(outcome).toMatchObject({ status: 'completed', value: 'built' });
    expect(seen).toMatchObject({ callId: 'b1', name: 'build' });
    expect(events).toEqual([
      { sessionId: 's', turnId: 't', callId: 'b1', name: 'build', data: { stream: 'stdout', text: 'unit 1\n' } },
      { sessionId: 's', turnId: 't', callId: 'b1', name: 'build', data: { stream: 'stderr', text: 'warning\n' } },
      { sessionId: 's', turnId: 't', callId: 'b1', name: 'build', data: { percent: 50 } },
    ]);
    expect(onDisk().map((e) => e.type)).toEqual(['turn_started', 'tool_call', 'tool_output', 'status']);
    expect(JSON.stringify(onDisk())).not.toContain('unit 1');
    // After the call ended: dropped.
    seen!.progress('late');
    expect(events).toHaveLength(3);
  });

  it('of a real command cut by a stop is recorded on its tool_aborted entry as partial, and progress after the stop is dropped', async () => {
    const events: string[] = [];
    scene.runner.on('tool_progress', ({ data }) => events.push((data as { text: string }).text));
    const printed = latch();
    let child: ReturnType<typeof spawn> | undefined;
    let afterStop: (() => void) | undefined;
    const outcome = scene.runner.run('s', (turn) => turn.tool('make', {}, (token, call) => new Promise<never>((_resolve, reject) => {
      child = spawn('sh', ['-c', 'echo "compiled unit 1"; echo "compiled unit 2"; echo "unit 3: error" >&2; exec sleep 60']);
      let seen = '';
      const onData = (stream: 'stdout' | 'stderr') => (chunk: Buffer) => {
        call.progress({ stream, text: chunk.toString() });
        seen += chunk.toString();
        if (seen.includes('unit 2') && seen.includes('unit 3')) printed.open();
      };
      child.stdout!.on('data', onData('stdout'));
      child.stderr!.on('data', onData('stderr'));
      afterStop = () => call.progress({ stream: 'stdout', text: 'after the stop\n' });
      token.signal.addEventListener('abort', () => { afterStop!(); child!.kill('SIGKILL'); reject(token.signal.reason); });
    })));
    await printed.promise;
    const report = await scene.runner.stop('s');
    expect(report).toMatchObject({ reason: 'cancel.user' });
    expect((await outcome).status).toBe('cancelled');
    const aborted = abortedEntry();
    expect(aborted.output).toMatch(/^aborted by user after \d+\.\ds$/);
    expect(aborted.partial).toMatchObject({ success: false, progress: true });
    const text = aborted.partial!.output as string;
    expect(text).toContain('compiled unit 1\n');
    expect(text).toContain('compiled unit 2\n');
    expect(text).toContain('unit 3: error\n');
    expect(text).not.toContain('after the stop');
    expect(events.join('')).not.toContain('after the stop');
    await eventually(() => isGone(child!.pid!), 5000, 'the command to be gone');
  });

  it('keeps a long output within MAX_PROGRESS_BYTES: its head, its latest tail and the count between', async () => {
    const inside = latch();
    const lines = Array.from({ length: 20_000 }, (_, i) => `line ${i}\n`);
    const total = lines.join('').length;
    const outcome = scene.runner.run('s', (turn) => turn.tool('log', {}, async (token, call) => {
      for (const line of lines) call.progress(line);
      inside.open();
      await new Promise((r) => token.signal.addEventListener('abort', r));
      throw token.signal.reason;
    }));
    await inside.promise;
    await scene.runner.stop('s');
    await outcome;
    const text = abortedEntry().partial!.output as string;
    expect(text.startsWith('line 0\nline 1\n')).toBe(true);
    expect(text.endsWith('line 19998\nline 19999\n')).toBe(true);
    const omitted = Number(/\n… (\d+) bytes omitted …\n/.exec(text)![1]);
    const kept = text.replace(/\n… \d+ bytes omitted …\n/, '');
    expect(kept.length + omitted).toBe(total);
    expect(kept.length).toBe(MAX_PROGRESS_BYTES);
  });

  it('costs the same a call however many pieces it has kept: 200 KB in one-character pieces, the last 10 K calls cost under 3x the first 10 K', async () => {
    const inside = latch();
    const pieces = 200_000;
    const windows: number[] = []; // ms per 10 K calls
    const letter = (i: number) => String.fromCharCode(97 + (i % 26));
    const outcome = scene.runner.run('s', (turn) => turn.tool('relay', {}, async (token, call) => {
      let t = performance.now();
      for (let i = 0; i < pieces; i++) {
        call.progress(letter(i));
        if ((i + 1) % 10_000 === 0) {
          const now = performance.now();
          windows.push(now - t);
          t = now;
        }
      }
      inside.open();
      await new Promise((r) => token.signal.addEventListener('abort', r));
      throw token.signal.reason;
    }));
    await inside.promise;
    await scene.runner.stop('s');
    await outcome;
    // Medians of five windows: one GC pause does not decide it. Before: a shift() over ~48 K kept
    // pieces a call, ~740 ms per 10 K calls once the tail was full against ~5 ms at the start.
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    const first = median(windows.slice(0, 5));
    const last = median(windows.slice(-5));
    expect(last / first, `first ${windows.slice(0, 5).map((w) => w.toFixed(1))} ms, last ${windows.slice(-5).map((w) => w.toFixed(1))} ms`).toBeLessThan(3);
    expect(windows.reduce((a, b) => a + b, 0)).toBeLessThan(5_000); // liveness only: ~40 ms when idle
    // What is recorded is unchanged: the first and the latest pieces, and the count between.
    const text = abortedEntry().partial!.output as string;
    const all = Array.from({ length: pieces }, (_, i) => letter(i)).join('');
    const { omitted, kept } = countsOf(text);
    expect(kept + omitted).toBe(pieces);
    expect(kept).toBe(MAX_PROGRESS_BYTES);
    expect(text.startsWith(all.slice(0, MAX_PROGRESS_BYTES / 4))).toBe(true);
    expect(text.endsWith(all.slice(-(MAX_PROGRESS_BYTES - MAX_PROGRESS_BYTES / 4)))).toBe(true);
  }, 60_000);

  it('holds its bound, not the strings it was given: three 100 MB progress strings leave the call holding a few MiB, not 200', async () => {
    const r = await heldByProgress('one-call');
    expect(r.reason).toBe('cancel.user');
    expect(r.heldMiB).toBeLessThan(16);
  }, 60_000);

  it('is let go once its call has ended: 500 finished calls of 100 KB each leave their turn holding a few MiB, not 500 bounds', async () => {
    const r = await heldByProgress('many-calls');
    expect(r.reason).toBe('cancel.user');
    expect(r.heldMiB).toBeLessThan(8);
  }, 60_000);

  it('is not recorded where the call returned a value itself after the signal; a call with no progress has no partial', async () => {
    const inside = latch();
    const outcome = scene.runner.run('s', async (turn) => {
      await Promise.all([
        turn.tool('returns', {}, async (token, call) => {
          call.progress('so far');
          inside.open();
          await new Promise((r) => token.signal.addEventListener('abort', r));
          return 'cleaned up';
        }, { callId: 'r' }),
        turn.tool('silent', {}, async (token) => { await new Promise((r) => token.signal.addEventListener('abort', r)); throw new Error('cut'); }, { callId: 'n' }),
        turn.tool('data', {}, async (token, call) => {
          call.progress({ percent: 40 });
          await new Promise((r) => token.signal.addEventListener('abort', r));
          throw new Error('cut');
        }, { callId: 'd' }),
      ]);
    });
    await inside.promise;
    await scene.runner.stop('s');
    await outcome;
    const byCall = new Map(onDisk().filter((e) => e.type === 'tool_aborted').map((e) => [(e as unknown as Aborted).callId, e as unknown as Aborted]));
    expect(byCall.get('r')!.partial).toEqual({ output: 'cleaned up', success: true });
    expect(byCall.get('n')!.partial).toEqual({ output: 'cut', success: false });
    expect(byCall.get('d')!.partial).toEqual({ output: { percent: 40 }, success: false, progress: true });
  });
});

describe('a call that returns nothing once stopped', () => {
  it('records its progress as partial, or no partial without any; the model is never shown {"success":true} as its output', async () => {
    const inside = latch<void>();
    let started = 0;
    const outcome = scene.runner.run('s', async (turn) => {
      const returnsNothing = (report: boolean) => async (token: { signal: AbortSignal }, call: ToolCall) => {
        if (report) call.progress('compiled unit 1\n');
        if (++started === 2) inside.open();
        await new Promise((r) => token.signal.addEventListener('abort', r));
      };
      await Promise.all([
        turn.tool('reports', {}, returnsNothing(true), { callId: 'p' }),
        turn.tool('silent', {}, returnsNothing(false), { callId: 'n' }),
      ]);
    }, { turnId: 't' });
    await inside.promise;
    await scene.runner.stop('s');
    await outcome;
    const entries = await scene.ledger.entries({ sessionId: 's' });
    const byCall = new Map(entries.filter((e) => e.type === 'tool_aborted').map((e) => [(e as unknown as Aborted).callId, e as unknown as Aborted]));
    expect(byCall.get('p')!.partial).toEqual({ output: 'compiled unit 1\n', success: false, progress: true });
    expect(byCall.get('n')!.partial).toBeUndefined();
    const results = (toModelMessages(entries).find((m) => m.role === 'tool') as { content: Array<{ toolCallId: string; output: { value: string } }> }).content;
    expect(results.find((r) => r.toolCallId === 'p')!.output.value).toMatch(/^aborted by user after \d+\.\ds\n\nIts output before the stop:\ncompiled unit 1\n$/);
    expect(results.find((r) => r.toolCallId === 'n')!.output.value).toMatch(/^aborted by user after \d+\.\ds$/);
  });
});

/** `text`'s `… N bytes omitted …` count and the bytes it keeps around that line. */
function countsOf(text: string): { omitted: number; kept: number } {
  const line = /\n… (\d+) bytes omitted …\n/.exec(text);
  expect(line).not.toBeNull();
  return { omitted: Number(line![1]), kept: Buffer.byteLength(text.replace(line![0], '')) };
}

describe('a long progress cut twice', () => {
  /** Runs a call that reports `lines` then waits for its stop; stops it; resolves with the ledger's entries. */
  async function cutAfter(runner: TurnRunner, lines: readonly string[]): Promise<LedgerEntry[]> {
    const inside = latch();
    const outcome = runner.run('s', (turn) => turn.tool('make', {}, async (token, call) => {
      for (const line of lines) call.progress({ stream: 'stdout', text: line });
      inside.open();
      await new Promise((r) => token.signal.addEventListener('abort', r));
      throw token.signal.reason;
    }), { turnId: 't' });
    await inside.promise;
    await runner.stop('s');
    expect((await outcome).status).toBe('cancelled');
    return scene.ledger.entries({ sessionId: 's' });
  }
  const lines = Array.from({ length: 100_000 }, (_, i) => `compiled unit ${i}\n`);
  const total = Buffer.byteLength(lines.join(''));

  it('records, under a maxOutputBytes below MAX_PROGRESS_BYTES, the omitted count of the whole output, not of the kept text', async () => {
    const runner = new TurnRunner({ registry: scene.registry, ledger: scene.ledger, graceMs: 100, maxOutputBytes: 10_000 });
    const aborted = (await cutAfter(runner, lines)).find((e) => e.type === 'tool_aborted') as unknown as Aborted;
    const text = aborted.partial!.output as string;
    expect(text.startsWith('compiled unit 0\n')).toBe(true);
    expect(text.endsWith('compiled unit 99999\n')).toBe(true);
    const { omitted, kept } = countsOf(text);
    expect(kept).toBeLessThanOrEqual(10_000);
    expect(kept + omitted).toBe(total);
    expect(aborted.partial).toMatchObject({ success: false, progress: true, omittedBytes: omitted });
  });

  it('is given to the model (toModelMessages) with the omitted count of the whole output, not of the 64 KiB the ledger kept', async () => {
    const entries = await cutAfter(scene.runner, lines);
    const tool = toModelMessages(entries).find((m) => m.role === 'tool') as { content: Array<{ output: { value: string } }> };
    const value = tool.content[0]!.output.value;
    const shown = value.slice(value.indexOf('stop:\n') + 6);
    expect(shown.startsWith('compiled unit 0\n')).toBe(true);
    expect(shown.endsWith('compiled unit 99999\n')).toBe(true);
    const { omitted, kept } = countsOf(shown);
    expect(kept).toBeLessThanOrEqual(4096);
    expect(kept).toBeGreaterThan(4000);
    expect(kept + omitted).toBe(total);
  });

  it('of a value the call returned after the signal, cut to maxOutputBytes, is given to the model with the whole value\'s omitted count', async () => {
    const runner = new TurnRunner({ registry: scene.registry, ledger: scene.ledger, graceMs: 1000, maxOutputBytes: 10_000 });
    const inside = latch();
    const outcome = runner.run('s', (turn) => turn.tool('make', {}, async (token) => {
      inside.open();
      await new Promise((r) => token.signal.addEventListener('abort', r));
      return lines.join('');
    }), { turnId: 't' });
    await inside.promise;
    await runner.stop('s');
    await outcome;
    const entries = await scene.ledger.entries({ sessionId: 's' });
    const tool = toModelMessages(entries).find((m) => m.role === 'tool') as { content: Array<{ output: { value: string } }> };
    const value = tool.content[0]!.output.value;
    const { omitted, kept } = countsOf(value.slice(value.indexOf('stop:\n') + 6));
    expect(kept).toBeLessThanOrEqual(4096);
    expect(kept + omitted).toBe(total);
  });
});

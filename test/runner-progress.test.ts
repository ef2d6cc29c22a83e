/**
 * Live output (`call.progress`): a tool call reports its output as it happens, the `tool_progress`
 * event carries it, the ledger does not write it line by line, and a call a stop cuts records how
 * far it got on its `tool_aborted` entry.
 */
import { describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { MAX_PROGRESS_BYTES, type ToolCall } from '../dist/src/index.js';
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

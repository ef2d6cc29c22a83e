/**
 * exec's output as it arrives (`onOutput`) and as it is kept (head and tail past `maxBuffer`), with
 * real processes. Fixtures that must write in a fixed order wait for the test's "got it" file
 * (writes-on-ack.mjs), so every piece arrives in a read of its own: no sleep decides an order.
 */
import { execFile } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { exec, spawnBackground, TurnRegistry, type OutputChunk } from '../dist/src/index.js';
import { isGone } from './support/leaks.js';
import { closeScene, fixture, LIVENESS_MS, openScene, turnOf, type Scene } from './fixtures/exec/support.js';

const run = promisify(execFile);
let scene: Scene;
beforeEach(() => { scene = openScene(new TurnRegistry()); });
afterEach(() => closeScene(scene));

const hex = (bytes: number[] | string) => Buffer.from(bytes as never).toString('hex');

/** exec of writes-on-ack.mjs: `pieces` are [fd, bytes]; onOutput records each chunk and says "got it". */
async function writesOnAck(pieces: Array<[1 | 2, number[] | string]>) {
  const chunks: OutputChunk[] = [];
  const result = await exec(process.execPath, [fixture('writes-on-ack.mjs'), scene.dir, ...pieces.map(([fd, bytes]) => `${fd}:${hex(bytes)}`)], {
    onOutput: (chunk) => {
      writeFileSync(join(scene.dir, `ack-${chunks.length}`), '');
      chunks.push(chunk);
    },
  });
  return { chunks, result };
}

/** Warnings of type FullstopListenerWarning raised while `fn` runs (and the turn of the loop after). */
async function warningsDuring(fn: () => Promise<unknown>): Promise<Error[]> {
  const seen: Error[] = [];
  const listener = (w: Error) => { if (w.name === 'FullstopListenerWarning') seen.push(w); };
  process.on('warning', listener);
  try {
    await fn();
    await new Promise((resolve) => setImmediate(resolve)); // warnings are emitted on the next tick
  } finally {
    process.off('warning', listener);
  }
  return seen;
}

describe('exec onOutput: the output as it arrives', () => {
  it('gets stdout and stderr interleaved as written, each piece once, and the result still holds both', async () => {
    const { chunks, result } = await writesOnAck([[1, 'out 1\n'], [2, 'err 1\n'], [1, 'out 2\n'], [2, 'err 2\n']]);
    expect(chunks).toEqual([
      { stream: 'stdout', text: 'out 1\n' }, { stream: 'stderr', text: 'err 1\n' },
      { stream: 'stdout', text: 'out 2\n' }, { stream: 'stderr', text: 'err 2\n' },
    ]);
    expect(result).toMatchObject({ exitCode: 0, stdout: 'out 1\nout 2\n', stderr: 'err 1\nerr 2\n', omittedBytes: { stdout: 0, stderr: 0 } });
  });

  it('never splits a UTF-8 character written in two writes: it comes whole with the read that completes it', async () => {
    const euro = [...Buffer.from('€')]; // e2 82 ac
    const smile = [...Buffer.from('😀')]; // f0 9f 98 80
    const { chunks, result } = await writesOnAck([
      [1, [0x61, ...euro.slice(0, 2)]], [1, [...euro.slice(2), 0x62]],
      [2, [0x63, ...smile.slice(0, 2)]], [2, [...smile.slice(2), 0x64]],
    ]);
    expect(chunks).toEqual([
      { stream: 'stdout', text: 'a' }, { stream: 'stdout', text: '€b' },
      { stream: 'stderr', text: 'c' }, { stream: 'stderr', text: '😀d' },
    ]);
    expect(result).toMatchObject({ exitCode: 0, stdout: 'a€b', stderr: 'c😀d' });
  });

  it('100 MB of output: onOutput sees every byte, the result keeps its head and tail, and the run holds ~1 MB, not 100', async () => {
    // In a process of its own, so that what the exec holds is measured alone (a full GC, then
    // heapUsed, every 64th chunk). Kept whole, the same output holds ~96 MiB there.
    const n = 12_500_000;
    const { stdout } = await run(process.execPath, ['--expose-gc', fixture('numbered-output.mjs'), String(n), '1000000'], { timeout: 60_000 });
    const r = JSON.parse(stdout) as Record<string, any>;
    let total = 0;
    for (let digits = 1, from = 1; from <= n; digits++, from *= 10) total += (Math.min(n, from * 10 - 1) - from + 1) * (digits + 1);
    expect(total).toBeGreaterThan(100_000_000);
    expect(r.exitCode).toBe(0);
    expect(r.seenBytes).toBe(total);
    expect(r.first).toEqual(['1', '2', '3']);
    expect(r.last).toEqual([String(n - 1), String(n), '']);
    expect(r.omittedBytes).toEqual({ stdout: total - 1_000_000, stderr: 0 });
    expect(r.marker).toBe(`… ${total - 1_000_000} bytes omitted …`);
    expect(r.stdoutLength).toBe(1_000_000 + r.marker.length + 2); // the line and its two newlines
    expect(r.heldMiB).toBeLessThan(16);
  }, 60_000);

  it('an onOutput returning a promise that never settles keeps no chunk: 200 MB printed, the heap back within 30 MB once the exec settled', async () => {
    // In a process of its own, with --expose-gc: a full GC before the exec and after it settled.
    const bytes = 200_000_000;
    const { stdout } = await run(process.execPath, ['--expose-gc', fixture('pending-on-output.mjs'), String(bytes)], { timeout: 120_000 });
    const r = JSON.parse(stdout) as Record<string, any>;
    expect(r).toMatchObject({ exitCode: 0, seenBytes: bytes, pendingKept: true });
    expect(r.afterMiB - r.beforeMiB).toBeLessThan(30);
  }, 120_000);

  it('a stop mid-output: onOutput is not called after the result, which holds exactly what it saw; no process is left', async () => {
    const token = turnOf(scene);
    let settled = false;
    let late = 0;
    let seen = '';
    const streams = new Set<string>();
    const result = await exec('yes', ['0123456789'], {
      token,
      onOutput: ({ stream, text }) => {
        if (settled) late++;
        streams.add(stream);
        seen += text;
        if (!token.isCancelled()) token.cancel();
      },
    });
    settled = true;
    expect(result.cancelled).toBe(true);
    expect(result.stdout.length).toBeGreaterThan(0);
    expect(result.stdout).toBe(seen);
    expect([...streams]).toEqual(['stdout']);
    expect(result.stdout.split('\n').slice(0, -1).every((line) => line === '0123456789')).toBe(true);
    expect(isGone(result.pid)).toBe(true);
    await new Promise((resolve) => setImmediate(resolve));
    expect(late).toBe(0);
  });

  it('a throwing onOutput does not stop the command: one warning a stream, the calls go on, the output is whole', async () => {
    let calls = 0;
    let result: Awaited<ReturnType<typeof exec>> | undefined;
    const warnings = await warningsDuring(async () => {
      result = await exec('seq', ['1', '200000'], { onOutput: () => { calls++; throw new Error('ui gone'); } });
    });
    expect(result!.exitCode).toBe(0);
    expect(result!.stdout.endsWith('\n199999\n200000\n')).toBe(true);
    expect(result!.stdout.length).toBe(1_288_895);
    expect(calls).toBeGreaterThan(1);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]!.message).toMatch(/options\.onOutput threw on stdout: .*ui gone/);
    expect((warnings[0] as Error & { code?: string }).code).toBe('FULLSTOP_ON_OUTPUT_THREW');
  });

  it('an async onOutput that rejects is reported the same way, never as an unhandled rejection', async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const warnings = await warningsDuring(() => exec('sh', ['-c', 'echo a; echo b >&2'], { onOutput: async () => { throw new Error('async ui gone'); } }));
      expect(warnings.map((w) => w.message.match(/threw on (\w+)/)![1]).sort()).toEqual(['stderr', 'stdout']);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
    expect(unhandled).toEqual([]);
  });

  it('an onOutput returning a thenable whose then throws (or whose then getter throws) is a warning too, never an uncaught exception', async () => {
    const uncaught: unknown[] = [];
    const onUncaught = (error: unknown) => uncaught.push(error);
    process.on('uncaughtException', onUncaught);
    try {
      const thenThrows = await warningsDuring(() => exec('sh', ['-c', 'echo a'], { onOutput: () => ({ then() { throw new Error('then threw'); } }) as never }));
      const getterThrows = await warningsDuring(() => exec('sh', ['-c', 'echo a'], { onOutput: () => ({ get then() { throw new Error('getter threw'); } }) as never }));
      expect(thenThrows.map((w) => w.message)).toEqual([expect.stringMatching(/options\.onOutput threw on stdout: then threw/)]);
      expect(getterThrows.map((w) => w.message)).toEqual([expect.stringMatching(/options\.onOutput threw on stdout: getter threw/)]);
    } finally {
      process.off('uncaughtException', onUncaught);
    }
    expect(uncaught).toEqual([]);
  });

  it('refuses an onOutput that is not a function with a TypeError naming options.onOutput, spawning nothing', async () => {
    const marker = join(scene.dir, 'touched');
    for (const bad of [42, 'log', {}, null]) {
      await expect(exec('touch', [marker], { onOutput: bad as never })).rejects.toThrow(TypeError);
      await expect(exec('touch', [marker], { onOutput: bad as never })).rejects.toThrow(/^options\.onOutput: expected a function, got /);
      expect(() => spawnBackground('touch', [marker], { onOutput: bad as never })).toThrow(/options\.onOutput: expected a function/);
    }
    expect(existsSync(marker)).toBe(false);
  });

  it('spawnBackground takes onOutput too, and its exited result holds the output', async () => {
    const chunks: OutputChunk[] = [];
    const bg = spawnBackground('sh', ['-c', 'echo started; echo warn >&2'], { onOutput: (c) => chunks.push(c) });
    const r = await bg.exited;
    expect(r).toMatchObject({ exitCode: 0, stdout: 'started\n', stderr: 'warn\n' });
    expect(chunks.filter((c) => c.stream === 'stdout').map((c) => c.text).join('')).toBe('started\n');
    expect(chunks.filter((c) => c.stream === 'stderr').map((c) => c.text).join('')).toBe('warn\n');
  });
});

describe('exec maxBuffer: past it, the head and the tail', () => {
  it('keeps the first ceil(max/2) and last floor(max/2) bytes of each stream, with the omitted bytes between', async () => {
    const r = await exec('sh', ['-c', 'printf 0123456789abcdefghij; printf ABCDEFGHIJK >&2'], { maxBuffer: 10 });
    expect(r.stdout).toBe('01234\n… 10 bytes omitted …\nfghij');
    expect(r.stderr).toBe('ABCDE\n… 1 bytes omitted …\nGHIJK');
    expect(r.omittedBytes).toEqual({ stdout: 10, stderr: 1 });
    expect(r.exitCode).toBe(0); // the command ran to its end
  });

  it('the omitted-bytes line stands between two newlines whatever the head ends with; output that fits is whole', async () => {
    const r = await exec('printf', ['ab\\ncd\\nEFGH\\nij\\n'], { maxBuffer: 6 });
    expect(r.stdout).toBe('ab\n\n… 8 bytes omitted …\nij\n');
    const whole = await exec('printf', ['ab\\ncd\\n'], { maxBuffer: 6 });
    expect(whole).toMatchObject({ stdout: 'ab\ncd\n', omittedBytes: { stdout: 0, stderr: 0 } });
  });

  it('counts maxBuffer in UTF-8 bytes, as the omitted bytes, and never cuts a character or a surrogate pair in two', async () => {
    // 10 × 3 bytes: 6 bytes keep one euro each end (as characters, 6 would keep three).
    const euros = await exec('printf', ['€€€€€€€€€€'], { maxBuffer: 6 });
    expect(euros.stdout).toBe('€\n… 24 bytes omitted …\n€');
    expect(euros.omittedBytes.stdout).toBe(24);
    // 4 × 4 bytes (8 UTF-16 units): 8 bytes keep one each end (as characters, 8 would keep all four).
    const smiles = await exec('printf', ['😀😀😀😀'], { maxBuffer: 8 });
    expect(smiles.stdout).toBe('😀\n… 8 bytes omitted …\n😀');
    // A bound inside a character keeps less, never half of it.
    const cut = await exec('printf', ['😀😀😀😀'], { maxBuffer: 7 });
    expect(cut.stdout.isWellFormed()).toBe(true);
    expect(cut.stdout).toBe('😀\n… 12 bytes omitted …\n'); // head 4 bytes, tail 3: no room for a whole one
    expect(cut.omittedBytes.stdout).toBe(12);
  });

  it('counts a cut stream of bytes that are not UTF-8 on their replacement characters: never 0 bytes omitted when it was cut', async () => {
    // 250 bytes 0xFF: 250 U+FFFD (3 bytes each in UTF-8), 300 bytes of them kept (50 each end).
    const r = await exec('sh', ['-c', 'head -c 250 /dev/zero | tr "\\0" "\\377"'], { maxBuffer: 300 });
    expect(r.stdout).toBe(`${'\uFFFD'.repeat(50)}\n… 450 bytes omitted …\n${'\uFFFD'.repeat(50)}`);
    expect(r.omittedBytes).toEqual({ stdout: 450, stderr: 0 });
  });

  it('a command writing without end is not stopped by maxBuffer: a timeout or a token is what ends it', async () => {
    const r = await exec('yes', [], { maxBuffer: 100, timeoutMs: 300 });
    expect(r.timedOut).toBe(true);
    expect(r.stdout).toMatch(/^(y\n){25}\n… \d+ bytes omitted …\n(\n?y)+\n?$/);
    expect(r.omittedBytes.stdout).toBeGreaterThan(1000);
    expect(isGone(r.pid)).toBe(true);
  }, LIVENESS_MS);
});

/**
 * No input crashes, hangs or corrupts exec: an output past the longest string V8 holds, sparse
 * `args`, NUL bytes in `env` or `cwd`, timers past the longest Node honours. Each is refused at the
 * call with an error naming the argument (nothing spawned); an output past the longest string is
 * kept as its head and tail.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { exec, spawnBackground, TurnRegistry } from '../dist/src/index.js';
import { closeScene, fixture, openScene, type Scene } from './fixtures/exec/support.js';

const run = promisify(execFile);
let scene: Scene;
beforeEach(() => { scene = openScene(new TurnRegistry()); });
afterEach(() => closeScene(scene));

describe('exec: output past the longest string V8 can hold', () => {
  it('700 MB with maxBuffer 1e9: the result keeps a head and a tail within the longest string, the host alive', async () => {
    // In a process of its own, so the half-gigabyte string does not stay in this runner's heap.
    const { stdout } = await run(process.execPath, [fixture('huge-output.mjs'), '700000000', '1000000000'], { timeout: 60_000, maxBuffer: 1 << 20 });
    const r = JSON.parse(stdout.trim().split('\n').at(-1)!) as Record<string, number | boolean>;
    const kept = (r.maxString as number) - 64; // MAX_OUTPUT_CHARS: room for the omitted-bytes line
    expect(r).toMatchObject({ resolved: true, stderrLength: 0, omittedBytes: 700_000_000 - kept });
    expect(r.stdoutLength).toBeLessThanOrEqual(r.maxString as number);
  }, 60_000);

  it('a maxBuffer overflow keeps the head and the tail of each stream, and the command ends by itself', async () => {
    const r = await exec('sh', ['-c', 'printf 0123456789; echo err >&2; i=0; while [ $i -lt 100 ]; do printf 0123456789; i=$((i+1)); done; printf END'], { maxBuffer: 25 });
    expect(r.stdout).toBe('0123456789012\n… 988 bytes omitted …\n123456789END');
    expect(r.stderr).toBe('err\n');
    expect(r.exitCode).toBe(0);
  });
});

describe('exec: bad arguments are refused at the call, nothing spawned', () => {
  const marker = () => join(scene.dir, 'touched');
  const cases: Array<[string, () => [unknown, unknown], RegExp, ErrorConstructor]> = [
    // eslint-disable-next-line no-sparse-arrays
    ['sparse args (a hole)', () => [[marker(), , 'x'], undefined], /args\[1\]: expected a string, got a hole/, TypeError],
    ['args of length 3 with no elements', () => [new Array(3), undefined], /args\[0\]: expected a string, got a hole/, TypeError],
    ['NUL in an env value', () => [[marker()], { env: { A: 'x\0y' } }], /options\.env\.A: expected a string without NUL bytes/, TypeError],
    ['NUL in an env name', () => [[marker()], { env: { 'A\0B': 'x' } }], /options\.env: expected variable names without NUL bytes/, TypeError],
    ['NUL in cwd', () => [[marker()], { cwd: '/tmp\0/x' }], /options\.cwd: expected a path without NUL bytes/, TypeError],
    ['timeoutMs past 2^31-1', () => [[marker()], { timeoutMs: 2 ** 31 }], /options\.timeoutMs: .*2147483647.*got 2147483648/, RangeError],
    ['graceMs past 2^31-1', () => [[marker()], { graceMs: 2 ** 32 }], /options\.graceMs: .*2147483647.*got 4294967296/, RangeError],
    ['timeoutMs Infinity', () => [[marker()], { timeoutMs: Infinity }], /options\.timeoutMs/, RangeError],
  ];
  for (const [what, make, message, type] of cases) {
    it(`${what} → ${type.name}`, async () => {
      const [args, options] = make();
      const refused = (e: unknown) => e instanceof type && message.test((e as Error).message);
      await expect(exec('touch', args as string[], options as never)).rejects.toSatisfy(refused);
      expect(() => spawnBackground('touch', args as string[], options as never)).toThrow(message);
      expect(existsSync(marker())).toBe(false);
    });
  }

  it('the longest timer Node honours is accepted, and does not fire early', async () => {
    const r = await exec('sh', ['-c', 'exit 0'], { timeoutMs: 2 ** 31 - 1, graceMs: 2 ** 31 - 1 });
    expect(r).toMatchObject({ exitCode: 0, timedOut: false });
  });
});

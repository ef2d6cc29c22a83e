/**
 * exec and spawnBackground as calls, in both containment modes: what runs and what does not, how
 * failures and bad input are reported, and background processes that no turn owns. Handshakes
 * through files the fixtures write, never a sleep.
 */
import { chmodSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  exec, killAllBackground, spawnBackground, type ExecOptions, type ExecResult, CancelledError, ToolError, TurnRegistry, type CancelToken,
} from '../dist/src/index.js';
import { isGone } from './support/leaks.js';
import { allGone, closeScene, fixture, treeOfFive, turnOf, MODES, noneGone, openScene, pidsIn, type Scene } from './fixtures/exec/support.js';

let scene: Scene;
let dir: string;
let registry: TurnRegistry;

beforeEach(() => {
  registry = new TurnRegistry();
  scene = openScene(registry);
  dir = scene.dir;
});

afterEach(() => closeScene(scene));

const turn = (session = 's'): CancelToken => turnOf(scene, session);

for (const mode of MODES) {
  const execIn = (file: string, args?: readonly string[], options?: ExecOptions) => exec(file, args, { containment: mode.option, ...options });
  const backgroundIn = (file: string, args?: readonly string[], options?: ExecOptions) => spawnBackground(file, args, { containment: mode.option, ...options });

  describe(`[${mode.name}]`, () => {
    describe('exec: what runs and what does not', () => {
      it('a non-zero exit resolves with its code and output', async () => {
        const result = await execIn('sh', ['-c', 'echo out; echo err >&2; exit 3']);
        expect(result).toMatchObject({ exitCode: 3, signal: null, stdout: 'out\n', stderr: 'err\n', cancelled: false, forced: false });
        expect(result.pid).toBeGreaterThan(1);
        expect(result.wallMs).toBeGreaterThan(0);
      });

      it('arguments like $(touch x) reach the child verbatim, through no shell', async () => {
        const marker = join(dir, 'x');
        const arg = `$(touch ${marker}); touch ${marker} \`touch ${marker}\``;
        const result = await execIn('printf', ['%s', arg]);
        expect(result.stdout).toBe(arg);
        expect(existsSync(marker)).toBe(false);
      });

      it('a cancelled token spawns nothing and rejects with CancelledError', async () => {
        const token = turn();
        const marker = join(dir, 'touched');
        token.cancel();
        await expect(execIn('touch', [marker], { token })).rejects.toBeInstanceOf(CancelledError);
        expect(existsSync(marker)).toBe(false);
      });

      it('a retired token or an aborted signal spawns nothing either', async () => {
        const token = turn();
        registry.endTurn('s', token);
        const marker = join(dir, 'touched');
        await expect(execIn('touch', [marker], { token })).rejects.toBeInstanceOf(CancelledError);
        await expect(execIn('touch', [marker], { signal: AbortSignal.abort() })).rejects.toBeInstanceOf(CancelledError);
        expect(() => backgroundIn('touch', [marker], { signal: AbortSignal.abort() })).toThrow(CancelledError);
        expect(existsSync(marker)).toBe(false);
      });

      it('a command that cannot be spawned rejects with a ToolError naming it (ENOENT, EACCES)', async () => {
        const missing = execIn('/nonexistent/fullstop-cmd', ['a']);
        await expect(missing).rejects.toBeInstanceOf(ToolError);
        await expect(missing).rejects.toThrow(/"\/nonexistent\/fullstop-cmd".*ENOENT/);
        const notExecutable = join(dir, 'not-executable');
        writeFileSync(notExecutable, '#!/bin/sh\n');
        chmodSync(notExecutable, 0o644);
        await expect(execIn(notExecutable)).rejects.toThrow(/not-executable.*EACCES/);
        expect(() => backgroundIn('/nonexistent/fullstop-cmd')).toThrow(ToolError);
        expect(() => backgroundIn(notExecutable)).toThrow(/EACCES/);
      });

      it('input, cwd and env pass through', async () => {
        const result = await execIn('sh', ['-c', 'cat; pwd; echo "$FULLSTOP_TEST"'], { input: 'from stdin\n', cwd: dir, env: { FULLSTOP_TEST: 'from env' } });
        expect(result.stdout).toBe(`from stdin\n${dir}\nfrom env\n`);
      });

      it('the command sees exactly the environment given, names that are not shell identifiers included', async () => {
        // A cgroup's join runs through sh, which drops such names from what it passes on.
        const env = { 'spring.profiles.active': 'dev', 'FOO-BAR': 'a b\nc', '1X': '$(touch x)', plain_name: 'p' };
        const result = await execIn(process.execPath, ['-e', 'process.stdout.write(JSON.stringify(process.env))'], { env });
        expect(JSON.parse(result.stdout)).toEqual({ ...process.env, ...env });
        expect(result.containment).toBe(mode.name);
      });

      it('stdin is /dev/null without input, so a reader ends at once', async () => {
        expect(await execIn('cat')).toMatchObject({ exitCode: 0, stdout: '' });
      });

      it('an output past maxBuffer does not stop the tree: the command ends by itself, its head and tail kept', async () => {
        const r = await execIn('sh', ['-c', 'i=0; while [ $i -lt 1000 ]; do echo 0123456789; i=$((i+1)); done; echo last'], { maxBuffer: 1000 });
        expect(r).toMatchObject({ exitCode: 0, cancelled: false, omittedBytes: { stdout: 11_005 - 1000, stderr: 0 } });
        expect(r.stdout.startsWith('0123456789\n'.repeat(45))).toBe(true);
        expect(r.stdout).toContain(`\n… ${11_005 - 1000} bytes omitted …\n`);
        expect(r.stdout.endsWith('0123456789\nlast\n')).toBe(true);
        expect(isGone(r.pid)).toBe(true);
      });
    });

    describe('exec: bad input is refused before anything is spawned', () => {
      const cases: Array<[string, () => unknown[], RegExp, ErrorConstructor]> = [
        ['graceMs negative', () => [['x'], { graceMs: -1 }], /options\.graceMs.*-1/, RangeError],
        ['graceMs NaN', () => [['x'], { graceMs: NaN }], /options\.graceMs.*NaN/, RangeError],
        ['timeoutMs negative', () => [['x'], { timeoutMs: -5 }], /options\.timeoutMs.*-5/, RangeError],
        ['args not an array', () => ['x' as unknown], /args: expected an array.*"x"/, TypeError],
        ['args with a non-string', () => [['x', 3]], /args\[1\].*3/, TypeError],
        ['token not a CancelToken', () => [['x'], { token: { signal: new AbortController().signal } }], /options\.token.*CancelToken/, TypeError],
        ['signal not an AbortSignal', () => [['x'], { signal: 'stop' }], /options\.signal.*"stop"/, TypeError],
        ['options not an object', () => [['x'], 42], /options: expected an object.*42/, TypeError],
      ];
      for (const [what, args, message, type] of cases) {
        it(`${what} → ${type.name}`, async () => {
          const marker = join(dir, 'touched');
          const [argv, options] = args();
          const a = Array.isArray(argv) ? [marker, ...argv.slice(1)] : argv;
          await expect(exec('touch', a as string[], options as never)).rejects.toSatisfy((e: unknown) => e instanceof type && message.test(String((e as Error).message)));
          expect(() => spawnBackground('touch', a as string[], options as never)).toThrow(type);
          expect(existsSync(marker)).toBe(false);
        });
      }

      it('an empty or non-string command → TypeError', async () => {
        await expect(exec('')).rejects.toThrow(TypeError);
        await expect(exec(undefined as never)).rejects.toThrow(/file: expected a non-empty command string.*, got undefined/);
        await expect(exec(['touch'] as never)).rejects.toThrow(TypeError);
        expect(() => spawnBackground('')).toThrow(TypeError);
      });
    });

    describe('spawnBackground: not bound to any turn', () => {
      it('survives a turn stop (cancel and endTurn) and dies by its own kill()', async () => {
        const token = turn();
        const pidfile = join(dir, 'pids');
        const background = backgroundIn('sh', [fixture('ignores-term.sh'), pidfile], { token, graceMs: 50 });
        const pids = await treeOfFive(pidfile);
        const foreground = execIn('sleep', ['1000'], { token });
        token.cancel();
        await foreground;
        registry.endTurn('s', token);
        expect(noneGone(pids)).toBe(true);
        expect(background.pid).toBe(pids[0]);
        await background.kill();
        expect(allGone(pids)).toBe(true);
        expect(await background.exited).toMatchObject({ cancelled: true, forced: true, pid: pids[0] });
      });

      it('killAllBackground() ends every background process', async () => {
        const a = backgroundIn('sleep', ['1000']);
        const ready = join(dir, 'ready');
        const b = backgroundIn('sh', [fixture('exits-on-term.sh'), ready]);
        const bPids = await pidsIn(ready);
        await killAllBackground();
        expect(allGone([a.pid, ...bPids])).toBe(true);
        const results: ExecResult[] = await Promise.all([a.exited, b.exited]);
        expect(results.map((r) => r.cancelled)).toEqual([true, true]);
      });
    });
  });
}

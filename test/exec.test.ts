/**
 * exec: subprocess trees that really die, in both containment modes (a cgroup of its own where the
 * host allows it, the process group otherwise). Every test synchronises with its fixtures through
 * files they write (never a sleep); the time bounds are generous liveness bounds, except where a
 * test shows that something did NOT happen within a window.
 */
import { chmodSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { exec, killAllBackground, spawnBackground, type ExecOptions, type ExecResult } from '../dist/src/exec/index.js';
import { CancelledError, ToolError, TurnRegistry, TurnRunner, type CancelToken } from '../dist/src/index.js';
import { governStop, ownersOf } from '../dist/src/token/owners.js';
import { eventually, isGone, liveDescendants } from './support/leaks.js';
import { allGone, closeScene, fixture, LIVENESS_MS, MODES, noneGone, openScene, pgidOf, pidsIn, type Scene } from './fixtures/exec/support.js';

let scene: Scene;
let dir: string;
let registry: TurnRegistry;

beforeEach(() => {
  registry = new TurnRegistry();
  scene = openScene(registry);
  dir = scene.dir;
});

afterEach(() => closeScene(scene));

function turn(session = 's'): CancelToken {
  const token = registry.beginTurn(session);
  scene.tokens.push(token);
  return token;
}

/** The five pids of tree-of-five.sh / ignores-term.sh. */
async function treeOfFive(pidfile: string): Promise<number[]> {
  const [shell, a, b, nested] = await pidsIn(pidfile);
  const [nestedShell, nestedSleep] = await pidsIn(`${pidfile}.nested`);
  expect(nestedShell).toBe(nested);
  return [shell!, a!, b!, nested!, nestedSleep!];
}

for (const mode of MODES) {
  const execIn = (file: string, args?: readonly string[], options?: ExecOptions) => exec(file, args, { containment: mode.option, ...options });
  const backgroundIn = (file: string, args?: readonly string[], options?: ExecOptions) => spawnBackground(file, args, { containment: mode.option, ...options });

  describe(`[${mode.name}]`, () => {
  describe('exec: the stop kills the whole tree', () => {
    it('a tree of five processes is all gone after a token cancel', async () => {
      const token = turn();
      const pidfile = join(dir, 'pids');
      const running = execIn('sh', [fixture('tree-of-five.sh'), pidfile], { token });
      const pids = await treeOfFive(pidfile);
      expect(new Set(pids).size).toBe(5);
      expect(noneGone(pids)).toBe(true);
      expect(pids.map(pgidOf)).toEqual(pids.map(() => pids[0]));
      token.cancel();
      const result = await running;
      expect(allGone(pids)).toBe(true);
      expect(result).toMatchObject({ cancelled: true, timedOut: false, exitCode: null, signal: 'SIGTERM', pid: pids[0] });
      expect(result.stdout).toBe('tree of five: starting\n');
    });

    it('a group that ignores SIGTERM is killed after the grace window, with forced: true', async () => {
      const token = turn();
      const pidfile = join(dir, 'pids');
      const graceMs = 300;
      const running = execIn('sh', [fixture('ignores-term.sh'), pidfile], { token, graceMs });
      const pids = await treeOfFive(pidfile);
      const cancelledAt = performance.now();
      token.cancel();
      const result = await running;
      const waited = performance.now() - cancelledAt;
      expect(waited).toBeGreaterThanOrEqual(graceMs - 1);
      expect(allGone(pids)).toBe(true);
      expect(readFileSync(`${pidfile}.signals`, 'utf8')).toBe('TERM\n');
      expect(result).toMatchObject({ cancelled: true, forced: true, signal: 'SIGKILL', exitCode: null });
      // Partial output: what was written before the stop is kept.
      expect(result.stdout).toBe('ignores term: starting\nignores term: ready\n');
    });

    it('a child that exits on SIGTERM is cancelled, not forced, and does not wait out the grace', async () => {
      const token = turn();
      const ready = join(dir, 'ready');
      const graceMs = 5000;
      const running = execIn('sh', [fixture('exits-on-term.sh'), ready], { token, graceMs });
      const pids = await pidsIn(ready);
      const cancelledAt = performance.now();
      token.cancel();
      const result = await running;
      expect(performance.now() - cancelledAt).toBeLessThan(graceMs / 2);
      expect(allGone(pids)).toBe(true);
      expect(result).toMatchObject({ cancelled: true, forced: false, timedOut: false, signal: 'SIGTERM' });
      expect(result.stdout).toBe('partial output before the stop\n');
      expect(result.stderr).toBe('partial error output\n');
    });

    it('a setsid grandchild whose parent died of the SIGTERM is still found and swept', async () => {
      const token = turn();
      const pidfile = join(dir, 'pids');
      const running = execIn('sh', [fixture('setsid-escape.sh'), pidfile], { token, graceMs: 100 });
      const [root, sleep] = await pidsIn(pidfile);
      const escaped = await pidsIn(`${pidfile}.escaped`);
      for (const pid of escaped) expect(pgidOf(pid)).not.toBe(root);
      token.cancel();
      const result = await running;
      expect(allGone([root!, sleep!, ...escaped])).toBe(true);
      // The escaped shell ignores SIGTERM: only the hard stop could end it.
      expect(result).toMatchObject({ cancelled: true, forced: true });
    });

    it('a plain AbortSignal stops the tree like a token', async () => {
      const controller = new AbortController();
      const pidfile = join(dir, 'pids');
      const running = execIn('sh', [fixture('tree-of-five.sh'), pidfile], { signal: controller.signal });
      const pids = await treeOfFive(pidfile);
      controller.abort();
      const result = await running;
      expect(allGone(pids)).toBe(true);
      expect(result).toMatchObject({ cancelled: true, timedOut: false, forced: false });
    });

    it('timeoutMs stops the tree with the same sequence and timedOut: true', async () => {
      const pidfile = join(dir, 'pids');
      const timeoutMs = 1500;
      const result = await execIn('sh', [fixture('ignores-term.sh'), pidfile], { timeoutMs, graceMs: 50 });
      const pids = await treeOfFive(pidfile);
      expect(allGone(pids)).toBe(true);
      expect(result.wallMs).toBeGreaterThanOrEqual(timeoutMs + 50 - 1);
      expect(result).toMatchObject({ timedOut: true, cancelled: false, forced: true });
      expect(readFileSync(`${pidfile}.signals`, 'utf8')).toBe('TERM\n');
    });

    it('retiring the token while the child runs stops it (the turn is over)', async () => {
      const token = turn();
      const ready = join(dir, 'ready');
      const running = execIn('sh', [fixture('exits-on-term.sh'), ready], { token });
      const pids = await pidsIn(ready);
      registry.endTurn('s', token);
      const result = await running;
      expect(allGone(pids)).toBe(true);
      expect(result.cancelled).toBe(true);
    });

    it('processes the child leaves running after it exits are stopped too', async () => {
      const result = await execIn('sh', ['-c', 'sleep 1000 >/dev/null 2>&1 & echo $!']);
      const leftover = Number(result.stdout);
      expect(leftover).toBeGreaterThan(1);
      expect(isGone(leftover)).toBe(true);
      expect(result).toMatchObject({ exitCode: 0, cancelled: false, timedOut: false });
    });
  });

  describe('exec: whose grace', () => {
    it('under a runner stop (isStopGoverned) only SIGTERM goes; SIGKILL waits for the owner hardStop()', async () => {
      const token = turn();
      const pidfile = join(dir, 'pids');
      const graceMs = 20;
      const running = execIn('sh', [fixture('ignores-term.sh'), pidfile], { token, graceMs });
      const pids = await treeOfFive(pidfile);
      governStop(token);
      token.cancel();
      await eventually(() => existsSync(`${pidfile}.signals`), LIVENESS_MS, 'the SIGTERM');
      // Ten times exec's own grace: had it applied, SIGKILL would have gone by now.
      await new Promise((r) => setTimeout(r, graceMs * 10));
      expect(noneGone(pids)).toBe(true);
      const owners = ownersOf(token);
      expect(owners.map((o) => o.kind)).toEqual(['process']);
      await owners[0]!.hardStop();
      expect(allGone(pids)).toBe(true);
      expect(await running).toMatchObject({ cancelled: true, forced: true, signal: 'SIGKILL' });
      expect(registry.stats().liveOwners).toBe(0);
    });
  });

  describe('exec: as an owner of its token', () => {
    it('a child that settles by itself is gone from its token by the time its settled resolves', async () => {
      const token = turn();
      const ready = join(dir, 'ready');
      const running = execIn('sh', [fixture('exits-on-term.sh'), ready], { token });
      await pidsIn(ready);
      const [owner] = ownersOf(token);
      expect(owner!.kind).toBe('process');
      expect(registry.stats().liveOwners).toBe(1);
      token.cancel();
      await owner!.settled;
      expect(ownersOf(token)).toEqual([]);
      expect(registry.stats().liveOwners).toBe(0);
      await running;
    });

    it('a TurnRunner stop SIGKILLs a SIGTERM-ignoring tree after the stop\'s grace and counts one process group', async () => {
      const runner = new TurnRunner({ registry });
      const pidfile = join(dir, 'pids');
      const outcome = runner.run('runner', (t) => t.tool('sh', { script: 'ignores-term' }, (token) => execIn('sh', [fixture('ignores-term.sh'), pidfile], { token, graceMs: 10_000 })));
      const pids = await treeOfFive(pidfile);
      const report = await runner.stop('runner', { graceMs: 100 });
      expect(allGone(pids)).toBe(true);
      expect(report).toMatchObject({ settledCooperatively: false, hardStopped: { processGroups: 1 } });
      expect(report!.hardStopAt).toBeLessThan(5000); // exec's own 10 s grace did not apply
      expect((await outcome).status).toBe('cancelled');
    });
  });

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

    it('stdin is /dev/null without input, so a reader ends at once', async () => {
      expect(await execIn('cat')).toMatchObject({ exitCode: 0, stdout: '' });
    });

    it('an output past maxBuffer stops the tree and rejects with a ToolError naming the option', async () => {
      const pidfile = join(dir, 'pid');
      const running = execIn('sh', ['-c', `echo $$ > ${pidfile}; while :; do echo 0123456789; done`], { maxBuffer: 1000 });
      await expect(running).rejects.toThrow(/maxBuffer \(1000 characters\)/);
      expect(isGone(Number(readFileSync(pidfile, 'utf8')))).toBe(true);
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

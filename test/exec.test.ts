/**
 * exec: subprocess trees that really die, in both containment modes (a cgroup of its own where the
 * host allows it, the process group otherwise). Every test synchronises with its fixtures through
 * files they write (never a sleep). Upper time bounds are generous liveness bounds; the lower ones
 * show that a grace or a timeout was waited out (a timer never fires early).
 */
import { execFile } from 'node:child_process';
import { getEventListeners } from 'node:events';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { exec, type ExecOptions, TurnRegistry, TurnRunner, type CancelToken } from '../dist/src/index.js';
import { governStop, ownersOf } from '../dist/src/token/owners.js';
import { eventually, isGone } from './support/leaks.js';
import { allGone, closeScene, fixture, treeOfFive, turnOf, LIVENESS_MS, MODES, noneGone, openScene, pgidOf, pidsIn, type Scene } from './fixtures/exec/support.js';

const run = promisify(execFile);

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
        const graceMs = 60_000;
        const running = execIn('sh', [fixture('exits-on-term.sh'), ready], { token, graceMs });
        const pids = await pidsIn(ready);
        const cancelledAt = performance.now();
        token.cancel();
        const result = await running;
        // A liveness bound far below the grace: the window ended when the tree did.
        expect(performance.now() - cancelledAt).toBeLessThan(LIVENESS_MS);
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
        // No grace of its own: had it applied, SIGKILL would follow the SIGTERM at once.
        const running = execIn('sh', [fixture('ignores-term.sh'), pidfile], { token, graceMs: 0 });
        const pids = await treeOfFive(pidfile);
        governStop(token);
        token.cancel();
        const signals = () => (existsSync(`${pidfile}.signals`) ? readFileSync(`${pidfile}.signals`, 'utf8') : '');
        await eventually(() => signals() === 'TERM\n', LIVENESS_MS, 'the SIGTERM');
        // Handshake: the root shell answers a SIGTERM of ours after the stop's, so it was still alive then.
        process.kill(pids[0]!, 'SIGTERM');
        await eventually(() => signals() === 'TERM\nTERM\n', LIVENESS_MS, 'the tree to answer a later SIGTERM');
        expect(noneGone(pids)).toBe(true);
        const owners = ownersOf(token);
        expect(owners.map((o) => o.kind)).toEqual(['process']);
        await owners[0]!.hardStop();
        expect(allGone(pids)).toBe(true);
        expect(await running).toMatchObject({ cancelled: true, forced: true, signal: 'SIGKILL' });
        expect(registry.stats().liveOwners).toBe(0);
      });
    });

    describe('exec: what a settled child leaves behind', () => {
      it("removes its listener from the caller's signal, however it ended", async () => {
        const controller = new AbortController();
        // One child that exits by itself, one stopped by a cancel of its token.
        await execIn('true', [], { signal: controller.signal, timeoutMs: 60_000 });
        expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
        const token = turn();
        const ready = join(dir, 'ready');
        const running = execIn('sh', [fixture('exits-on-term.sh'), ready], { token, signal: controller.signal, timeoutMs: 60_000 });
        await pidsIn(ready);
        expect(getEventListeners(controller.signal, 'abort')).toHaveLength(1);
        token.cancel();
        expect(await running).toMatchObject({ cancelled: true, timedOut: false });
        expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
      });

      it('clears its timeout timer: a host whose only child has settled exits at once', async () => {
        // An uncleared 60 s timer would hold this host for a minute after its child exited.
        const entry = new URL('../dist/src/exec/index.js', import.meta.url).href;
        const script = `import { exec } from ${JSON.stringify(entry)};
          await exec('true', [], { containment: ${JSON.stringify(mode.option)}, timeoutMs: 60_000 });
          await exec('sh', ['-c', 'sleep 30'], { containment: ${JSON.stringify(mode.option)}, timeoutMs: 100 });`;
        const t0 = performance.now();
        await run(process.execPath, ['--input-type=module', '-e', script], { timeout: 30_000 });
        expect(performance.now() - t0).toBeLessThan(20_000);
      }, 40_000);
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
        const outcome = runner.run('runner', (t) => t.tool('sh', { script: 'ignores-term' }, (token) => execIn('sh', [fixture('ignores-term.sh'), pidfile], { token, graceMs: 120_000 })));
        const pids = await treeOfFive(pidfile);
        const report = await runner.stop('runner', { graceMs: 100 });
        expect(allGone(pids)).toBe(true);
        expect(report).toMatchObject({ settledCooperatively: false, hardStopped: { processGroups: 1 } });
        expect(report!.hardStopAt).toBeLessThan(LIVENESS_MS); // exec's own 120 s grace did not apply
        expect((await outcome).status).toBe('cancelled');
      });
    });
  });
}

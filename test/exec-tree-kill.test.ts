/**
 * tree-kill containment: what hosts without /proc (macOS, Windows) get, forced here on Linux with
 * `containment: 'tree-kill'` so it is tested. The stop sends SIGTERM to the child's group, and the
 * hard stop kills the child's whole tree with tree-kill (its walk follows parents, not groups), then
 * the group. Handshakes through files the fixtures write.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  exec, execContainment, spawnBackground, type ExecOptions, TurnRegistry, TurnRunner,
} from '../dist/src/index.js';
import { eventually, isGone } from './support/leaks.js';
import { allGone, closeScene, fixture, noneGone, openScene, pgidOf, pidsIn, treeOfFive, turnOf, type Scene } from './fixtures/exec/support.js';

const run = promisify(execFile);
let scene: Scene;
let registry: TurnRegistry;
beforeEach(() => { registry = new TurnRegistry(); scene = openScene(registry); });
afterEach(() => closeScene(scene));

const execTk = (file: string, args: readonly string[], options?: ExecOptions) => exec(file, args, { containment: 'tree-kill', ...options });

describe('containment: tree-kill', () => {
  it('a tree of five that ignores SIGTERM: the SIGTERM reaches it, then the hard stop leaves no survivor', async () => {
    const token = turnOf(scene);
    const pidfile = join(scene.dir, 'pids');
    const running = execTk('sh', [fixture('ignores-term.sh'), pidfile], { token, graceMs: 100 });
    const pids = await treeOfFive(pidfile);
    expect(noneGone(pids)).toBe(true);
    token.cancel();
    const result = await running;
    expect(pids.filter((pid) => !isGone(pid))).toEqual([]);
    expect(readFileSync(`${pidfile}.signals`, 'utf8')).toBe('TERM\n');
    expect(result).toMatchObject({ containment: 'tree-kill', cancelled: true, forced: true, signal: 'SIGKILL' });
  });

  it('a subtree that left the group (setsid) under a live parent is killed too: the walk follows parents', async () => {
    const token = turnOf(scene);
    const pidfile = join(scene.dir, 'pids');
    const running = execTk('sh', [fixture('ignores-term-escapee.sh'), pidfile], { token, graceMs: 100 });
    const [root, sleep] = await pidsIn(pidfile);
    const escaped = await pidsIn(`${pidfile}.escaped`);
    for (const pid of escaped) expect(pgidOf(pid)).not.toBe(root);
    token.cancel();
    expect(await running).toMatchObject({ containment: 'tree-kill', forced: true });
    expect(allGone([root!, sleep!, ...escaped])).toBe(true);
  });

  it('a tree that obeys SIGTERM ends in the grace: cancelled, not forced', async () => {
    const token = turnOf(scene);
    const ready = join(scene.dir, 'ready');
    const running = execTk('sh', [fixture('exits-on-term.sh'), ready], { token, graceMs: 10_000 });
    const pids = await pidsIn(ready);
    token.cancel();
    expect(await running).toMatchObject({ containment: 'tree-kill', cancelled: true, forced: false, signal: 'SIGTERM' });
    // This mode sees only the leader's exit: the sleep got the same SIGTERM and may still be dying
    // when the call settles (a loaded machine schedules it a few ms later).
    await eventually(() => allGone(pids), 10_000, 'the sleep gone after its SIGTERM');
  });

  it('a TurnRunner stop hard-stops it after the stop\'s grace', async () => {
    const runner = new TurnRunner({ registry });
    const pidfile = join(scene.dir, 'pids');
    const outcome = runner.run('tk', (t) => t.tool('sh', {}, (token) => execTk('sh', [fixture('ignores-term.sh'), pidfile], { token, graceMs: 60_000 })));
    const pids = await treeOfFive(pidfile);
    const report = await runner.stop('tk', { graceMs: 100 });
    expect(allGone(pids)).toBe(true);
    expect(report).toMatchObject({ settledCooperatively: false, hardStopped: { processGroups: 1 } });
    expect((await outcome).status).toBe('cancelled');
  });

  it('spawnBackground takes the option too, and its kill() leaves no survivor', async () => {
    const pidfile = join(scene.dir, 'pids');
    const background = spawnBackground('sh', [fixture('ignores-term.sh'), pidfile], { containment: 'tree-kill', graceMs: 50 });
    expect(background.containment).toBe('tree-kill');
    const pids = await treeOfFive(pidfile);
    await background.kill();
    expect(allGone(pids)).toBe(true);
  });

  it('FULLSTOP_CONTAINMENT=tree-kill makes it the host\'s mode', async () => {
    expect(execContainment()).not.toBe('tree-kill'); // this host has /proc
    const entry = new URL('../dist/src/exec/index.js', import.meta.url).href;
    const script = `const m = await import(${JSON.stringify(entry)});
      const r = await m.exec('true');
      console.log(JSON.stringify({ probe: m.execContainment(), containment: r.containment }));`;
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], { env: { ...process.env, FULLSTOP_CONTAINMENT: 'tree-kill' }, timeout: 30_000 });
    expect(JSON.parse(stdout.trim())).toEqual({ probe: 'tree-kill', containment: 'tree-kill' });
  });
});

/**
 * Children never outlive the host, whatever kills it, and the library changes nothing in how the
 * host itself dies. A host fixture (host-exits-with-children.mjs) starts a foreground tree and a
 * background sleep, says "ready", and is then killed or exits; every child must be gone within 2 s
 * of the host's death, the reaper too, and (cgroup mode) no cgroup of the host may be left.
 */
import { spawn } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { cgroupDirectory } from '../dist/src/exec/containment.js';
import { exec, TurnRegistry } from '../dist/src/index.js';
import { eventually } from './support/leaks.js';
import { allGone, closeScene, fixture, MODES, noneGone, openScene, type Scene } from './fixtures/exec/support.js';

/** The promise of item 8: the tree is gone this soon after the host died. */
const GONE_AFTER_HOST_MS = 2000;

let scene: Scene;
beforeEach(() => { scene = openScene(new TurnRegistry()); });
afterEach(() => closeScene(scene));

interface Host {
  child: ReturnType<typeof spawn>;
  ready: Promise<{ pids: number[]; reaper: number }>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  output: () => string;
}

function host(mode: string, containment: string): Host {
  const env = { ...process.env, FULLSTOP_CONTAINMENT: containment === 'process-group' ? 'process-group' : '' };
  const child = spawn(process.execPath, [fixture('host-exits-with-children.mjs'), mode, join(scene.dir, 'pids')],
    { stdio: ['ignore', 'pipe', 'inherit'], cwd: scene.dir, env });
  let out = '';
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  const ready = new Promise<{ pids: number[]; reaper: number }>((resolve, reject) => {
    child.stdout!.on('data', (chunk: Buffer) => {
      out += chunk;
      const pids = /^ready (.*)$/m.exec(out);
      const reaper = /^reaper (\d+)$/m.exec(out);
      if (pids && reaper) resolve({ pids: pids[1]!.split(' ').map(Number), reaper: Number(reaper[1]) });
    });
    void exited.then(() => reject(new Error(`host exited before ready: ${out}`)));
  });
  return { child, ready, exited, output: () => out };
}

/** cgroups a host made and nobody removed. */
function cgroupsOf(pid: number): string[] {
  const base = cgroupDirectory();
  return base === undefined ? [] : readdirSync(base).filter((name) => name.startsWith(`fullstop-${pid}-`));
}

async function expectNothingLeft(h: Host, pids: number[], reaper: number): Promise<void> {
  await eventually(() => allGone(pids), GONE_AFTER_HOST_MS, 'every child of the host gone');
  await eventually(() => allGone([reaper]), GONE_AFTER_HOST_MS, 'the reaper gone');
  await eventually(() => cgroupsOf(h.child.pid!).length === 0, GONE_AFTER_HOST_MS, 'no cgroup of the host left');
}

describe('the host\'s own signal behaviour', () => {
  it('no signal listener of the library is installed while children run (only one for \'exit\')', async () => {
    const signals = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGQUIT'] as const;
    const before = signals.map((s) => process.listenerCount(s));
    const exitBefore = process.listenerCount('exit');
    const controller = new AbortController();
    const running = exec('sleep', ['1000'], { signal: controller.signal });
    expect(signals.map((s) => process.listenerCount(s))).toEqual(before);
    expect(process.listenerCount('exit')).toBe(exitBefore + 1);
    controller.abort();
    expect(await running).toMatchObject({ cancelled: true });
  });
});

for (const { name, option } of MODES) {
  describe(`[${name}] a host that dies leaves no child behind`, () => {
    for (const signal of ['SIGKILL', 'SIGHUP', 'SIGQUIT'] as const) {
      it(`${signal} (no 'exit' event): the reaper kills the foreground tree and the background sleep within 2 s`, async () => {
        const h = host('wait', option);
        const { pids, reaper } = await h.ready;
        expect(pids).toHaveLength(6);
        expect(noneGone([...pids, reaper])).toBe(true);
        h.child.kill(signal);
        expect(await h.exited).toEqual({ code: null, signal });
        await expectNothingLeft(h, pids, reaper);
      }, 20_000);
    }

    for (const signal of ['SIGTERM', 'SIGINT'] as const) {
      it(`${signal} with no handler of the host's: the host dies of it as Node would, its children within 2 s`, async () => {
        const h = host('wait', option);
        const { pids, reaper } = await h.ready;
        h.child.kill(signal);
        expect(await h.exited).toEqual({ code: null, signal });
        await expectNothingLeft(h, pids, reaper);
      }, 20_000);
    }

    it('with the host\'s own SIGTERM handler, the children live on while it runs and die when the host exits', async () => {
      const h = host('own-handler', option);
      const { pids, reaper } = await h.ready;
      h.child.kill('SIGTERM');
      expect(await h.exited).toEqual({ code: 7, signal: null });
      expect(h.output()).toContain(`host handler: ${pids.length} alive`);
      await expectNothingLeft(h, pids, reaper);
    }, 20_000);

    it('process.exit() with live children kills them all (the exit handler), and the reaper exits', async () => {
      const h = host('exit', option);
      const { pids, reaper } = await h.ready;
      expect(await h.exited).toEqual({ code: 0, signal: null });
      await expectNothingLeft(h, pids, reaper);
    }, 20_000);
  });
}

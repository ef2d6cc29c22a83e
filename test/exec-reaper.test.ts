/**
 * The reaper at scale: children die with their host, with 1,500 of them alive after 1,000 more were
 * registered and ended while those ran. Its bookkeeping is O(1) a registration and it kills before
 * it waits or cleans up (reaper.ts). The host (host-with-many-children.mjs) starts its children in
 * bulk through one shell and registers each exactly as exec does; exec-host-death.test.ts covers the
 * same promise end to end through exec.
 *
 * The promise is 2 s (docs/exec.md); run alone on a loaded 2-core machine this takes 1.2–1.5 s.
 * The bound here is a liveness bound: the suite runs files in parallel, and the kernel's exit of
 * 1,500 processes competes with them. The old reaper left all 1,500 alive 20 s after the host died.
 */
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { cgroupDirectory } from '../dist/src/exec/containment.js';
import { TurnRegistry } from '../dist/src/index.js';
import { eventually, isGone } from './support/leaks.js';
import { closeScene, fixture, LIVENESS_MS, MODES, openScene, type Scene } from './fixtures/exec/support.js';

/** Every child is gone this soon after the host's SIGKILL (a liveness bound: the promise is 2 s). */
const GONE_AFTER_HOST_MS = 5000;
const LIVE = 1500;
const ENDED = 1000;

let scene: Scene;
beforeEach(() => { scene = openScene(new TurnRegistry()); });
afterEach(() => closeScene(scene));

function cgroupsOf(pid: number): string[] {
  const base = cgroupDirectory();
  return base === undefined ? [] : readdirSync(base).filter((name) => name.startsWith(`fullstop-${pid}-`));
}

/** Start the host, SIGKILL it once ready, and check that everything of it is gone in time. */
async function killHost(mode: string, live: number, ended: number, awk: 'awk' | 'no-awk'): Promise<void> {
  const pidfile = join(scene.dir, 'pids');
  const host = spawn(process.execPath, [fixture('host-with-many-children.mjs'), mode, String(live), String(ended), pidfile, awk], { stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = new Promise((resolve) => host.once('exit', resolve));
  let pids: number[] = [];
  try {
    const reaper = await new Promise<number>((resolve, reject) => {
      let out = '';
      host.stdout!.on('data', (chunk: Buffer) => {
        out += chunk;
        const ready = /^ready (\d+)$/m.exec(out);
        if (ready) resolve(Number(ready[1]));
      });
      void exited.then(() => reject(new Error(`host exited before ready: ${out}`)));
    });
    pids = readFileSync(pidfile, 'utf8').split(' ').map(Number);
    expect(pids).toHaveLength(live);
    expect(pids.filter(isGone)).toEqual([]);
    const killedAt = performance.now();
    host.kill('SIGKILL');
    let left = pids;
    while (left.length > 0 && performance.now() - killedAt < LIVENESS_MS) {
      await new Promise((r) => setTimeout(r, 20));
      left = left.filter((pid) => !isGone(pid));
    }
    const goneMs = performance.now() - killedAt;
    expect(left).toEqual([]);
    expect(goneMs).toBeLessThan(GONE_AFTER_HOST_MS);
    await eventually(() => isGone(reaper), LIVENESS_MS, 'the reaper gone');
    await eventually(() => cgroupsOf(host.pid!).length === 0, LIVENESS_MS, 'no cgroup of the host left');
  } finally {
    host.kill('SIGKILL');
    await exited;
    for (const pid of pids) if (!isGone(pid)) process.kill(pid, 'SIGKILL');
  }
}

for (const { name } of MODES) {
  describe(`[${name}] the reaper at scale`, () => {
    it(`kills ${LIVE} live children soon after the host's SIGKILL, after ${ENDED} more that ended`, async () => {
      await killHost(name, LIVE, ENDED, 'awk');
    }, 120_000);

    it('does the same without awk (its fallback), at a smaller scale', async () => {
      await killHost(name, 100, 100, 'no-awk');
    }, 60_000);
  });
}

/**
 * The signal step costs O(the tree), never O(the machine): `token.cancel()` must not hold the main
 * thread for a read of every process in /proc (on a host running a thousand processes, every other
 * session would stall meanwhile). Shown without timing anything: the /proc reads made inside one
 * synchronous `cancel()` are counted, with and without a crowd of unrelated idle processes; they
 * must not include a listing of /proc, and must not grow with the crowd.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { exec } from '../dist/src/exec/index.js';
import { TurnRegistry } from '../dist/src/index.js';
import { eventually } from './support/leaks.js';
import { allGone, closeScene, fixture, LIVENESS_MS, MODES, openScene, pidsIn, type Scene } from './fixtures/exec/support.js';

let scene: Scene;
let registry: TurnRegistry;
beforeEach(() => { registry = new TurnRegistry(); scene = openScene(registry); });
afterEach(() => closeScene(scene));

/** The paths read (files and directory listings) while `fn` runs, synchronously. */
function readsDuring(fn: () => void): string[] {
  const reads: string[] = [];
  const { readFileSync, readdirSync } = fs;
  const spy = <F extends (...a: never[]) => unknown>(original: F) => ((path: unknown, ...rest: never[]) => {
    if (typeof path === 'string') reads.push(path);
    return original(path as never, ...rest);
  }) as unknown as F;
  fs.readFileSync = spy(readFileSync);
  fs.readdirSync = spy(readdirSync);
  syncBuiltinESMExports(); // the named imports of the library see the spies
  try {
    fn();
  } finally {
    fs.readFileSync = readFileSync;
    fs.readdirSync = readdirSync;
    syncBuiltinESMExports();
  }
  return reads;
}

/** A crowd of `n` idle processes that are none of the library's business; resolves once all run. */
async function crowd(n: number) {
  const ready = join(scene.dir, `crowd-${n}`);
  const child = spawn('sh', ['-c', `i=0; while [ $i -lt ${n} ]; do sleep 1000 & i=$((i+1)); done; echo ready > ${ready}; wait`], { stdio: 'ignore', detached: true });
  await eventually(() => fs.existsSync(ready), LIVENESS_MS, 'the crowd');
  return async () => {
    process.kill(-child.pid!, 'SIGKILL');
    await new Promise((r) => child.once('exit', r));
  };
}

/** The paths read by one synchronous cancel of a tree of five. */
async function readsOfOneCancel(containment: 'auto' | 'process-group'): Promise<string[]> {
  const token = registry.beginTurn(`s-${Math.random()}`);
  scene.tokens.push(token);
  const pidfile = join(scene.dir, `pids-${Math.random()}`);
  const running = exec('sh', [fixture('tree-of-five.sh'), pidfile], { token, containment });
  const pids = await pidsIn(pidfile);
  await pidsIn(`${pidfile}.nested`);
  const reads = readsDuring(() => token.cancel());
  await running;
  expect(allGone(pids)).toBe(true);
  return reads;
}

for (const { name, option } of MODES) {
  describe(`[${name}] the signal step`, () => {
    it('reads no listing of /proc, and as much of it with 300 unrelated processes as with none', async () => {
      const all = await readsOfOneCancel(option);
      expect(all.length).toBeGreaterThan(0); // the spies do see the library's reads
      const alone = all.filter((path) => path.startsWith('/proc'));
      const stop = await crowd(300);
      try {
        const crowded = (await readsOfOneCancel(option)).filter((path) => path.startsWith('/proc'));
        expect(alone).not.toContain('/proc');
        expect(crowded).not.toContain('/proc');
        // The same tree, so the same reads, give or take a racing child: not one per process of the host.
        expect(crowded.length).toBeLessThanOrEqual(alone.length + 10);
        expect(crowded.length).toBeLessThan(100);
      } finally {
        await stop();
      }
    }, 30_000);
  });
}

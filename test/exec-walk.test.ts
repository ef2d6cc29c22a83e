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
import { exec, TurnRegistry } from '../dist/src/index.js';
import { eventually } from './support/leaks.js';
import { allGone, closeScene, fixture, LIVENESS_MS, MODES, openScene, pidsIn, type Scene } from './fixtures/exec/support.js';

let scene: Scene;
let registry: TurnRegistry;
beforeEach(() => { registry = new TurnRegistry(); scene = openScene(registry); });
afterEach(() => closeScene(scene));

/**
 * The paths read (files and directory listings) while `fn` runs, synchronously: `held` were read on
 * the main thread, `started` were only handed to libuv's pool (fs/promises) and read meanwhile.
 */
function readsDuring(fn: () => void): { held: string[]; started: string[] } {
  const reads = { held: [] as string[], started: [] as string[] };
  const { readFileSync, readdirSync, readSync } = fs;
  const { readFile, readdir } = fs.promises;
  // A read through a descriptor kept open (cgroup.events) is a read too: recorded as `fd N`.
  const spy = <F extends (...a: never[]) => unknown>(original: F, into: string[]) => ((path: unknown, ...rest: never[]) => {
    if (typeof path === 'string') into.push(path);
    else if (typeof path === 'number') into.push(`fd ${path}`);
    return original(path as never, ...rest);
  }) as unknown as F;
  fs.readFileSync = spy(readFileSync, reads.held);
  fs.readdirSync = spy(readdirSync, reads.held);
  fs.readSync = spy(readSync, reads.held);
  fs.promises.readFile = spy(readFile, reads.started);
  fs.promises.readdir = spy(readdir, reads.started);
  syncBuiltinESMExports(); // the named imports of the library see the spies
  try {
    fn();
  } finally {
    fs.readFileSync = readFileSync;
    fs.readdirSync = readdirSync;
    fs.readSync = readSync;
    fs.promises.readFile = readFile;
    fs.promises.readdir = readdir;
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
async function readsOfOneCancel(containment: 'auto' | 'process-group'): Promise<{ held: string[]; started: string[] }> {
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
      const first = await readsOfOneCancel(option);
      const all = [...first.held, ...first.started];
      // The spies do see the library's reads: process-group mode walks the recorded tree here
      // (cgroup mode reads nothing here at all: see below).
      if (name === 'process-group') expect(all.length).toBeGreaterThan(0);
      const alone = all.filter((path) => path.startsWith('/proc'));
      const stop = await crowd(300);
      try {
        const again = await readsOfOneCancel(option);
        const crowded = [...again.held, ...again.started].filter((path) => path.startsWith('/proc'));
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

describe('[cgroup] the signal step', () => {
  it('reads nothing at all, not even off the main thread: the group is signalled, the rest waits for a later turn', async (ctx) => {
    if (MODES.every((m) => m.name !== 'cgroup')) ctx.skip();
    const { held, started } = await readsOfOneCancel('auto');
    expect(held).toEqual([]);
    expect(started).toEqual([]);
  }, 30_000);
});

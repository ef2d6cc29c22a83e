/**
 * A hard stop needs no new file descriptor. A host out of descriptors (EMFILE: a busy server with
 * every socket in use) must still kill the whole tree and end the stop: cgroup mode writes
 * `cgroup.kill` through a descriptor opened at the spawn, process-group mode walks /proc through a
 * descriptor held in reserve. The host (stop-out-of-fds.mjs) runs under `ulimit -n 256`, fills its
 * table with opens of /dev/null, then stops a turn whose tree only SIGKILL ends, part of it outside
 * the child's process group.
 */
import { execFile } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { exec, TurnRegistry } from '../dist/src/index.js';
import { eventually, isGone } from './support/leaks.js';
import { closeScene, fixture, MODES, openScene, pidsIn, turnOf, type Scene } from './fixtures/exec/support.js';

const run = promisify(execFile);
const GRACE_MS = 100;
/** The promise: the stop resolves, and `turn_aborted` is emitted, within the grace plus this. */
const STOP_BOUND_MS = GRACE_MS + 3000;

let scene: Scene;
beforeEach(() => { scene = openScene(new TurnRegistry()); });
afterEach(() => closeScene(scene));

interface Report { emfile: boolean; stopMs: number | null; abortedMs: number | null; alive: number[]; pids: number[]; containment: string | null }

const openDescriptors = () => readdirSync('/proc/self/fd').length;

for (const { name, option } of MODES) {
  describe(`[${name}] a stop in a host with no file descriptor left`, () => {
    it('resolves, with turn_aborted, within grace + 3 s, and the whole tree is gone', async () => {
      const pidfile = join(scene.dir, 'pids');
      const args = [fixture('stop-out-of-fds.mjs'), option, pidfile, String(GRACE_MS), String(STOP_BOUND_MS)];
      // `ulimit -n` in sh sets the hard limit too, so Node cannot raise it at start-up.
      const { stdout } = await run('sh', ['-c', 'ulimit -n 256 && exec "$0" "$@"', process.execPath, ...args], { timeout: 30_000 });
      const r = JSON.parse(stdout.trim().split('\n').at(-1)!) as Report;
      try {
        expect(r.emfile).toBe(true);
        expect(r.pids).toHaveLength(4);
        expect(r.stopMs).not.toBeNull();
        expect(r.stopMs!).toBeLessThanOrEqual(STOP_BOUND_MS);
        expect(r.abortedMs).not.toBeNull();
        expect(r.alive).toEqual([]);
        expect(r.pids.filter((pid) => !isGone(pid))).toEqual([]);
        expect(r.containment).toBe(name);
      } finally {
        for (const pid of r.pids) if (!isGone(pid)) process.kill(pid, 'SIGKILL');
      }
    }, 40_000);

    it('holds no descriptor of its own once its children have settled', async () => {
      // What Node and libuv open once, at the first child or watch, and keep: not ours to count.
      await exec('true', [], { containment: option });
      const before = openDescriptors();
      const token = turnOf(scene);
      const ready = join(scene.dir, 'ready');
      const running = exec('sh', [fixture('exits-on-term.sh'), ready], { token, containment: option });
      await pidsIn(ready);
      expect(openDescriptors()).toBeGreaterThan(before);
      token.cancel();
      await running;
      // A last fs operation of the call's end (its reaper entry, its cgroup) may still hold one for a moment.
      await eventually(() => openDescriptors() === before, 5000, `the descriptors back to ${before} (now ${openDescriptors()})`);
      expect(openDescriptors()).toBe(before);
    });
  });
}

/**
 * The identity rule: a stop never signals a process the library did not start, even when the
 * child's old pid (and so its old process group id) now belongs to a stranger.
 *
 * The scene needs pid reuse on demand, so it runs in a private PID namespace (`unshare -fp
 * --mount-proc`, as root), where /proc/sys/kernel/ns_last_pid chooses the next pid. The fixture
 * prints what happened as one JSON line.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { promisify } from 'node:util';
import { execFile } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { fixture, MODES } from './fixtures/exec/support.js';

const run = promisify(execFile);
const probe = spawnSync('unshare', ['-fp', '--mount-proc', 'true'], { encoding: 'utf8' });
const unshareWorks = probe.status === 0;
if (!unshareWorks) {
  console.log(`exec-identity: skipped, a private PID namespace cannot be made here (unshare -fp --mount-proc: ${(probe.stderr || probe.error?.message || `status ${probe.status}`).trim()})`);
}

interface Scene {
  leader: number; stranger: number; strangerPgid: number; strangerAlive: boolean;
  daemon: number; daemonAlive: boolean; dir: string;
  result: { cancelled: boolean; containment: string };
}

async function scene(mode: string): Promise<Scene> {
  const { stdout } = await run('unshare', ['-fp', '--mount-proc', process.execPath, fixture('stranger-gets-the-pid.mjs'), mode], { timeout: 30_000 });
  const s = JSON.parse(stdout.trim().split('\n').at(-1)!) as Scene;
  expect(existsSync(s.dir), `the fixture left ${s.dir}`).toBe(false);
  return s;
}

describe.runIf(unshareWorks)('exec: a stop spares a stranger that got the child\'s old pid', () => {
  for (const { name, option } of MODES) {
    it(`${name}: after the leader is reaped, its pid leads a stranger's group; the cancel leaves the stranger alive`, async () => {
      const s = await scene(option);
      // The scene really happened: the stranger has the leader's pid and leads group P.
      expect(s.stranger).toBe(s.leader);
      expect(s.strangerPgid).toBe(s.leader);
      expect(s.result).toEqual({ cancelled: true, containment: name });
      expect(s.strangerAlive).toBe(true);
    }, 40_000);
  }

  it.runIf(MODES.some((m) => m.name === 'cgroup'))('cgroup: the setsid daemon whose parent exited before the stop is killed too', async () => {
    const s = await scene('auto');
    expect(s.daemonAlive).toBe(false);
    expect(s.strangerAlive).toBe(true);
  }, 40_000);
});

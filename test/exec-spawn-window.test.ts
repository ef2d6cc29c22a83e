/**
 * Nothing `exec` spawns is ever unknown to the reaper (docs/exec.md, "Faults"): a host SIGKILLed
 * the instant its spawn returns, or at any random moment of a spawn-and-stop loop, leaves no
 * process behind and no cgroup. The host (host-dies-spawning.mjs) tags every command's environment,
 * so a survivor is found by scanning /proc, whether it ran the command or was still starting.
 */
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { cgroupDirectory } from '../dist/src/exec/containment.js';
import { removeCgroup } from '../dist/src/exec/hierarchy.js';
import { TurnRegistry } from '../dist/src/index.js';
import { eventually } from './support/leaks.js';
import { closeScene, fixture, MODES, openScene, type Scene } from './fixtures/exec/support.js';

/** A liveness bound: the reaper's promise is 2 s after the host's death. */
const GONE_AFTER_HOST_MS = 5000;
const RANDOM_KILLS = 20;
const MAX_DELAY_MS = 60;

let scene: Scene;
beforeEach(() => { scene = openScene(new TurnRegistry()); });
afterEach(() => closeScene(scene));

/** Live processes whose environment carries `tag` (zombies have none). */
function tagged(tag: string): number[] {
  const needle = `FULLSTOP_SURVIVOR_TAG=${tag}\0`;
  const out: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      if (readFileSync(`/proc/${name}/environ`, 'latin1').includes(needle)) out.push(Number(name));
    } catch { /* gone, or not ours */ }
  }
  return out;
}

function cgroupsOf(pid: number): string[] {
  const base = cgroupDirectory();
  return base === undefined ? [] : readdirSync(base).filter((name) => name.startsWith(`fullstop-${pid}-`));
}

/** Run the host to its death; resolves with its pid and stdout once it has died of SIGKILL. */
async function hostDies(args: string[]): Promise<{ pid: number; out: string }> {
  const host = spawn(process.execPath, [fixture('host-dies-spawning.mjs'), ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  host.stdout!.on('data', (chunk: Buffer) => { out += chunk; });
  const signal = await new Promise((resolve) => host.once('exit', (_code, s) => resolve(s)));
  expect(signal).toBe('SIGKILL');
  return { pid: host.pid!, out };
}

/** Kill what the spec found (so a failure leaks nothing into the next spec). */
function killAll(pids: number[]): void {
  for (const pid of pids) try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ }
}

async function expectNothingLeft(tag: string, hostPid: number, what: string): Promise<void> {
  try {
    await eventually(() => tagged(tag).length === 0, GONE_AFTER_HOST_MS, `no process of the host left (${what})`);
    await eventually(() => cgroupsOf(hostPid).length === 0, GONE_AFTER_HOST_MS, `no cgroup of the host left (${what})`);
  } finally {
    killAll(tagged(tag));
    for (const name of cgroupsOf(hostPid)) removeCgroup(join(cgroupDirectory()!, name));
  }
}

for (const { name, option } of MODES) {
  describe(`[${name}] a host killed while exec spawns leaves nothing`, () => {
    it('SIGKILLed the instant spawn returns: the child is gone within 5 s and its cgroup removed', async () => {
      const tag = randomBytes(6).toString('hex');
      const { pid, out } = await hostDies(['at-spawn', option, tag]);
      const spawned = /^spawned (\d+)$/m.exec(out);
      expect(spawned, out).not.toBeNull();
      await expectNothingLeft(tag, pid, `child ${spawned![1]}`);
    }, 30_000);

    it(`SIGKILLed at a random 0–${MAX_DELAY_MS} ms into a spawn-and-stop loop, ${RANDOM_KILLS} times: no survivor`, async () => {
      const survivors: string[] = [];
      for (let i = 0; i < RANDOM_KILLS; i++) {
        const tag = randomBytes(6).toString('hex');
        const delay = Math.floor(Math.random() * (MAX_DELAY_MS + 1));
        const { pid } = await hostDies(['random', option, tag, String(delay)]);
        try {
          await expectNothingLeft(tag, pid, `killed at ${delay} ms`);
        } catch (e) {
          survivors.push((e as Error).message);
        }
      }
      expect(survivors).toEqual([]);
    }, 600_000);
  });
}

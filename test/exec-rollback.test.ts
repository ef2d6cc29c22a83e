/**
 * `exec` never leaks what it spawned: when something fails after the spawn, what was spawned is
 * dead by the time the error surfaces, and the command never ran: the child is spawned as the
 * launcher, which waits, and is let run only once everything else of the call has succeeded
 * (src/exec/launcher.ts). The faults are injected on Node, where they are real failures of the
 * host's own code: a throwing 'newListener' listener (the host's, or a library's) fails the 'exit'
 * hook `exec` installs with its first child, and a pipe without `unref` is what Bun hands out
 * (docs/runtimes.md).
 */
import { existsSync } from 'node:fs';
import { Socket } from 'node:net';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { exec, spawnBackground, TurnRegistry } from '../dist/src/index.js';
import { eventually, isGone, toolTree } from './support/leaks.js';
import { allGone, closeScene, fixture, LIVENESS_MS, MODES, openScene, treeOfFive, turnOf, type Scene } from './fixtures/exec/support.js';

let scene: Scene;
let registry: TurnRegistry;
beforeEach(() => { registry = new TurnRegistry(); scene = openScene(registry); });
afterEach(() => closeScene(scene));

/**
 * Arm a fault: the next listener added for the process's 'exit' event throws. `spawned` is what
 * this process had started when it threw (the reaper aside): the child, still waiting to run.
 */
function failNextExitHook(): { error: Error; spawned: number[]; disarm: () => void } {
  const error = new Error('injected: a newListener listener threw');
  const spawned: number[] = [];
  const onNew = (event: string | symbol) => {
    if (event !== 'exit') return;
    process.removeListener('newListener', onNew);
    spawned.push(...toolTree());
    throw error;
  };
  process.on('newListener', onNew);
  return { error, spawned, disarm: () => process.removeListener('newListener', onNew) };
}

for (const mode of MODES) {
  describe(`a failure after the spawn (${mode.name})`, () => {
    it('exec rejects with the failure once what it spawned is gone, and the command never ran', async () => {
      const pidfile = join(scene.dir, 'tree');
      const fault = failNextExitHook();
      try {
        // SIGTERM-ignoring: were it running, only the rollback's SIGKILL would end it.
        const running = exec('sh', [fixture('ignores-term.sh'), pidfile], { token: turnOf(scene), containment: mode.option });
        await expect(running).rejects.toBe(fault.error);
      } finally {
        fault.disarm();
      }
      expect(fault.spawned).toHaveLength(1);
      expect(fault.spawned.filter((pid) => !isGone(pid))).toEqual([]); // at once: not eventually
      expect(existsSync(pidfile)).toBe(false);
    });

    it('spawnBackground throws the failure, what it spawned dies, and the command never ran', async () => {
      const pidfile = join(scene.dir, 'tree');
      const fault = failNextExitHook();
      try {
        expect(() => spawnBackground('sh', [fixture('ignores-term.sh'), pidfile], { containment: mode.option })).toThrow(fault.error);
      } finally {
        fault.disarm();
      }
      expect(fault.spawned).toHaveLength(1);
      await eventually(() => fault.spawned.every(isGone), LIVENESS_MS, 'what was spawned to die');
      expect(existsSync(pidfile)).toBe(false);
    });
  });
}

describe("a pipe without unref (Bun's)", () => {
  it('exec runs and stops as usual', async () => {
    const unref = Object.getOwnPropertyDescriptor(Socket.prototype, 'unref')!;
    let running: ReturnType<typeof exec>;
    const token = turnOf(scene);
    const pidfile = join(scene.dir, 'tree');
    // The reaper starts with the first child, inside exec's synchronous part.
    Object.defineProperty(Socket.prototype, 'unref', { value: undefined, configurable: true, writable: true });
    try {
      running = exec('sh', [fixture('tree-of-five.sh'), pidfile], { token });
    } finally {
      Object.defineProperty(Socket.prototype, 'unref', unref);
    }
    const pids = await treeOfFive(pidfile);
    token.cancel('user');
    expect(await running).toMatchObject({ cancelled: true });
    expect(allGone(pids)).toBe(true);
  });
});

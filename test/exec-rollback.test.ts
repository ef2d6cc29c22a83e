/**
 * `exec` never leaks what it spawned: when something fails after the spawn, the child's whole tree
 * is dead by the time the error surfaces. The faults are injected on Node, where they are real
 * failures of the host's own code: a throwing 'newListener' listener (the host's, or a library's)
 * fails the 'exit' hook `exec` installs with its first child, and a pipe without `unref` is what
 * Bun hands out (docs/runtimes.md).
 */
import { existsSync } from 'node:fs';
import { Socket } from 'node:net';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { exec, spawnBackground, TurnRegistry } from '../dist/src/index.js';
import { eventually } from './support/leaks.js';
import { allGone, closeScene, fixture, LIVENESS_MS, MODES, openScene, treeOfFive, turnOf, type Scene } from './fixtures/exec/support.js';

let scene: Scene;
let registry: TurnRegistry;
beforeEach(() => { registry = new TurnRegistry(); scene = openScene(registry); });
afterEach(() => closeScene(scene));

/** Block this thread until `path` exists (the fault runs inside a synchronous listener). */
function waitSyncFor(path: string): void {
  const nap = new Int32Array(new SharedArrayBuffer(4));
  const deadline = Date.now() + LIVENESS_MS;
  while (!existsSync(path)) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${path}`);
    Atomics.wait(nap, 0, 0, 10);
  }
}

/**
 * Arm a fault: the next listener added for the process's 'exit' event throws, once the fixture's
 * tree is up (its handshake files exist), so the whole tree is there to be leaked.
 */
function failNextExitHook(pidfile: string): { error: Error; disarm: () => void } {
  const error = new Error('injected: a newListener listener threw');
  const onNew = (event: string | symbol) => {
    if (event !== 'exit') return;
    process.removeListener('newListener', onNew);
    waitSyncFor(`${pidfile}.nested`);
    waitSyncFor(pidfile);
    throw error;
  };
  process.on('newListener', onNew);
  return { error, disarm: () => process.removeListener('newListener', onNew) };
}

for (const mode of MODES) {
  describe(`a failure after the spawn (${mode.name})`, () => {
    it('exec rejects with the failure only once every process of the tree is gone', async () => {
      const pidfile = join(scene.dir, 'tree');
      const fault = failNextExitHook(pidfile);
      try {
        // SIGTERM-ignoring: only the rollback's SIGKILL ends it.
        const running = exec('sh', [fixture('ignores-term.sh'), pidfile], { token: turnOf(scene), containment: mode.option });
        await expect(running).rejects.toBe(fault.error);
      } finally {
        fault.disarm();
      }
      const pids = await treeOfFive(pidfile);
      expect(allGone(pids)).toBe(true); // at once: not eventually
    });

    it('spawnBackground throws the failure and its tree dies', async () => {
      const pidfile = join(scene.dir, 'tree');
      const fault = failNextExitHook(pidfile);
      try {
        expect(() => spawnBackground('sh', [fixture('ignores-term.sh'), pidfile], { containment: mode.option })).toThrow(fault.error);
      } finally {
        fault.disarm();
      }
      const pids = await treeOfFive(pidfile);
      await eventually(() => allGone(pids), LIVENESS_MS, 'the background tree to die');
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

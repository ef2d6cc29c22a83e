/**
 * A command that exited while a background descendant of it still holds its pipes: `exec` reads
 * them for PIPES_AFTER_EXIT_MS more, then settles with what arrived and says so
 * (`pipesHeldOpen: true`). The descendant is not killed by that: it stays in the call's tree, which
 * the turn's end or stop still ends (docs/exec.md, "Faults").
 */
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { exec, TurnRegistry } from '../dist/src/index.js';
import { eventually, isGone } from './support/leaks.js';
import { closeScene, LIVENESS_MS, MODES, openScene, pidsIn, turnOf, type Scene } from './fixtures/exec/support.js';

/** A liveness bound: the command is done at once, the read after its exit takes 200 ms. */
const SETTLES_WITHIN_MS = 5000;

let scene: Scene;
let registry: TurnRegistry;
beforeEach(() => { registry = new TurnRegistry(); scene = openScene(registry); });
afterEach(() => closeScene(scene));

const openDescriptors = () => readdirSync('/proc/self/fd').length;

for (const { name, option } of MODES) {
  describe(`[${name}] a background descendant holds the pipes after the command exited`, () => {
    it("settles within seconds with what arrived and pipesHeldOpen: true; the descendant lives on until the turn's end", async () => {
      // One call first: libuv opens the loop's inotify descriptor at the first watch of a cgroup
      // (cgroup.ts) and keeps it for the loop's life.
      await exec('true', [], { containment: option });
      const fds = openDescriptors();
      const token = turnOf(scene);
      const pidfile = join(scene.dir, 'sleeper');
      const startedAt = performance.now();
      const r = await exec('sh', ['-c', `sleep 30 & echo $! > ${pidfile}.tmp && mv ${pidfile}.tmp ${pidfile}; echo hi`], { token, containment: option });
      const ms = performance.now() - startedAt;
      expect(r).toMatchObject({ exitCode: 0, stdout: 'hi\n', stderr: '', pipesHeldOpen: true, cancelled: false, forced: false });
      expect(ms).toBeLessThan(SETTLES_WITHIN_MS);
      const [sleeper] = await pidsIn(pidfile);
      expect(isGone(sleeper!)).toBe(false); // not killed by the settle
      registry.endTurn(token.sessionId, token);
      scene.tokens.length = 0;
      await eventually(() => isGone(sleeper!), LIVENESS_MS, 'the descendant gone at the turn\'s end');
      await eventually(() => openDescriptors() <= fds, LIVENESS_MS, 'no descriptor left');
    }, 30_000);

    it('outside a turn the descendant runs to its own end, and then nothing of the call is left', async () => {
      const pidfile = join(scene.dir, 'sleeper');
      const r = await exec('sh', ['-c', `sleep 1 & echo $! > ${pidfile}.tmp && mv ${pidfile}.tmp ${pidfile}; echo hi`], { containment: option });
      expect(r).toMatchObject({ exitCode: 0, stdout: 'hi\n', pipesHeldOpen: true });
      const [sleeper] = await pidsIn(pidfile);
      expect(isGone(sleeper!)).toBe(false);
      // closeScene: no descendant, no cgroup, no listener left once it has ended.
    });

    it('a command whose pipes close with its exit: pipesHeldOpen is false and the output whole', async () => {
      const r = await exec('sh', ['-c', 'echo a; echo b >&2'], { containment: option });
      expect(r).toMatchObject({ exitCode: 0, stdout: 'a\n', stderr: 'b\n', pipesHeldOpen: false });
    });
  });
}

/**
 * A `signal` adds a cause; it never cuts a child off from its turn. `exec(file, args, { signal })`
 * inside a turn (the ambient token of a TurnRunner body or tool) runs under a child of the turn's
 * token: a stop of the turn reaches it, and the signal alone stops only this child.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { exec, type ExecResult, runInTurn, TurnRegistry, TurnRunner } from '../dist/src/index.js';
import { ownersOf } from '../dist/src/token/owners.js';
import { allGone, closeScene, fixture, openScene, pidsIn, type Scene } from './fixtures/exec/support.js';

let scene: Scene;
let registry: TurnRegistry;
beforeEach(() => { registry = new TurnRegistry(); scene = openScene(registry); });
afterEach(() => closeScene(scene));

describe('exec with a signal inside a turn', () => {
  it('a TurnRunner stop reaches an exec given its own signal', async () => {
    const runner = new TurnRunner({ registry });
    const ready = join(scene.dir, 'ready');
    const controller = new AbortController();
    let result: ExecResult | undefined;
    const outcome = runner.run('s', (t) => t.tool('sh', {}, async () => {
      result = await exec('sh', [fixture('exits-on-term.sh'), ready], { signal: controller.signal });
      return result.stdout;
    }));
    const pids = await pidsIn(ready);
    const report = await runner.stop('s', { graceMs: 5000 });
    expect(allGone(pids)).toBe(true);
    expect(result).toMatchObject({ cancelled: true, signal: 'SIGTERM' });
    expect(controller.signal.aborted).toBe(false);
    expect(report).toMatchObject({ settledCooperatively: true });
    expect((await outcome).status).toBe('cancelled');
  });

  it('the signal alone stops only its child: the turn token stays uncancelled, the child token is retired', async () => {
    const token = registry.beginTurn('s');
    scene.tokens.push(token);
    const ready = join(scene.dir, 'ready');
    const controller = new AbortController();
    const running = runInTurn(token, () => exec('sh', [fixture('exits-on-term.sh'), ready], { signal: controller.signal }));
    const pids = await pidsIn(ready);
    // The child is an owner under the turn's token (through a child token of its own).
    expect(ownersOf(token).map((o) => o.kind)).toEqual(['process']);
    controller.abort();
    expect(await running).toMatchObject({ cancelled: true });
    expect(allGone(pids)).toBe(true);
    expect(token.isCancelled()).toBe(false);
    // The child token made for the signal is retired with the child: nothing is left under the turn.
    expect(ownersOf(token)).toEqual([]);
    expect(registry.stats().liveTokens).toBe(1);
  });

  it('a cancelled ambient turn spawns nothing, with or without a signal', async () => {
    const token = registry.beginTurn('s');
    scene.tokens.push(token);
    token.cancel();
    const marker = join(scene.dir, 'touched');
    await expect(runInTurn(token, () => exec('touch', [marker], { signal: new AbortController().signal }))).rejects.toThrow(/cancel/i);
    expect(existsSync(marker)).toBe(false);
    expect(registry.stats().liveTokens).toBe(1);
  });
});

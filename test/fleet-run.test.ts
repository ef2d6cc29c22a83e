/**
 * `fleet.run`'s options and the bounds of every fleet entry point, on the shared Redis: a caller's
 * `signal` stops a fleet turn; ids past MAX_ID_LENGTH (a 1 MB turn id) are refused with a
 * RangeError naming the argument before anything reaches Redis (MONITOR sees none of them).
 */
import { describe, expect, it } from 'vitest';
import { MAX_ID_LENGTH } from '../dist/src/index.js';
import { Fleet } from '../dist/src/fleet/index.js';
import { client, redisReachable, REDIS_PORT } from './fixtures/fleet/support.js';
import { eventually, held } from './fixtures/fleet/scene.js';
import { redisScene } from './fixtures/fleet/backends.js';

const up = await redisReachable();
if (!up) console.warn(`fleet-run tests skipped: no Redis at 127.0.0.1:${REDIS_PORT} (start one with: redis-server --port ${REDIS_PORT}; CI always has it)`);

describe.skipIf(!up)('fleet.run options and id bounds', () => {
  const current = redisScene();

  it('a caller\'s signal given to fleet.run stops the turn with signalReason, the signal\'s reason as detail; its record says cancelled', async () => {
    const a = await current.scene.instance('A');
    const b = await current.scene.instance('B');
    const controller = new AbortController();
    const h = held();
    const run = a.fleet.run('s1', h.body, { turnId: 't1', signal: controller.signal, signalReason: 'cancel.disconnect', input: { text: 'hi' } });
    const turn = await h.started;
    controller.abort('Client connection prematurely closed.');
    const outcome = await run;
    expect(turn.signal.aborted).toBe(true);
    expect(outcome).toMatchObject({ status: 'cancelled', turnId: 't1', report: { reason: 'cancel.disconnect', detail: 'Client connection prematurely closed.' } });
    expect(await b.fleet.turn('s1')).toMatchObject({ status: 'cancelled', reason: 'cancel.disconnect' });
    // An aborted signal: nothing of the body runs. Not a signal: refused naming it, nothing registered.
    let ran = false;
    expect(await a.fleet.run('s1', async () => { ran = true; }, { turnId: 't2', signal: AbortSignal.abort('user pressed stop') }))
      .toMatchObject({ status: 'cancelled', report: { reason: 'cancel.client', detail: 'user pressed stop' } });
    expect(ran).toBe(false);
    await expect(a.fleet.run('s1', async () => 1, { turnId: 't3', signal: {} as AbortSignal })).rejects.toThrow(/options\.signal/);
    // signalReason: an id, only with a signal, well-formed (it goes into the Redis record).
    await expect(a.fleet.run('s1', async () => 1, { turnId: 't3', signalReason: 'cancel.user' })).rejects.toThrow(/^options\.signalReason/);
    await expect(a.fleet.run('s1', async () => 1, { turnId: 't3', signal: controller.signal, signalReason: '' })).rejects.toThrow(/^options\.signalReason/);
    await expect(a.fleet.run('s1', async () => 1, { turnId: 't3', signal: controller.signal, signalReason: '\uD800' })).rejects.toThrow(/^options\.signalReason/);
    expect(await b.fleet.turn('s1')).toMatchObject({ turnId: 't2' });
  });

  it('a 1 MB id never reaches Redis: run, stop, turn, answer and Fleet.start refuse it with a RangeError naming the argument', async () => {
    const a = await current.scene.instance('A');
    const huge = 'x'.repeat(1 << 20);
    const long = 'y'.repeat(MAX_ID_LENGTH + 1);
    const monitor = await client();
    const seen: string[] = [];
    await monitor.monitor((line) => { seen.push(line); });
    try {
      const refusals: Array<[Promise<unknown>, RegExp]> = [
        [a.fleet.run('s1', async () => 1, { turnId: huge }), /^options\.turnId/],
        [a.fleet.run(huge, async () => 1), /^sessionId/],
        [a.fleet.stop('s1', { turnId: huge }), /^options\.turnId/],
        [a.fleet.stop(huge), /^sessionId/],
        [a.fleet.stop('s1', { reason: long }), /^options\.reason/],
        [a.fleet.turn(huge), /^sessionId/],
        [a.fleet.answer(huge, 'x'), /^questionId/],
        [Fleet.start({ redis: a.redis, runner: a.runner, nodeId: long }), /^options\.nodeId/],
        [Fleet.start({ redis: a.redis, runner: a.runner, prefix: long }), /^options\.prefix/],
      ];
      for (const [call, name] of refusals) {
        const error = await call.then(() => undefined, (e: unknown) => e);
        expect(error).toBeInstanceOf(RangeError);
        expect((error as Error).message).toMatch(name);
      }
      // A sentinel sent after them: once MONITOR shows it, it has shown everything before it.
      const sentinel = `sentinel-${current.scene.prefix}`;
      await current.raw.sendCommand(['ECHO', sentinel]);
      await eventually(() => seen.some((l) => l.includes(sentinel)), 5000, 'the sentinel');
      expect(seen.filter((l) => l.includes('x'.repeat(MAX_ID_LENGTH)) || l.includes(long))).toEqual([]);
      expect((await current.raw.sendCommand(['SCAN', '0', 'MATCH', `${current.scene.prefix}:*xxxxxxxx*`, 'COUNT', '10000']) as [string, string[]])[1]).toEqual([]);
    } finally {
      monitor.destroy();
    }
    // The fleet still works.
    expect(await a.fleet.run('s1', async () => 1, { turnId: 'x'.repeat(MAX_ID_LENGTH) })).toMatchObject({ status: 'completed' });
  });
});

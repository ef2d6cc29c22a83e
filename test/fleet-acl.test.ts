/**
 * The ACL docs/fleet.md gives (its trust boundary is Redis access) is enough to run a fleet, and
 * keeps its user off every other key and channel: the ACL line is read from the doc itself, the
 * user is created on the shared Redis under a name of this test's own, and deleted after.
 */
import { readFileSync } from 'node:fs';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createClient } from 'redis';
import { client, dropKeys, keysUnder, redisReachable, REDIS_PORT, uniquePrefix, type Client } from './fixtures/fleet/support.js';
import { eventually, FleetScene, held } from './fixtures/fleet/scene.js';

const up = await redisReachable();
if (!up) console.warn(`fleet-acl tests skipped: no Redis at 127.0.0.1:${REDIS_PORT} (start one with: redis-server --port ${REDIS_PORT}; CI always has it)`);

/** The doc's ACL SETUSER line, for `user` with `password` and keys/channels under `prefix`. */
function documentedAcl(user: string, password: string, prefix: string): string[] {
  const doc = readFileSync(new URL('../docs/fleet.md', import.meta.url), 'utf8');
  const line = doc.split('\n').find((l) => l.startsWith('ACL SETUSER fullstop-fleet '));
  if (line === undefined) throw new Error('docs/fleet.md has no ACL SETUSER fullstop-fleet line');
  return line.split(' ').map((w, i) => (i === 2 ? user : w === '>long-random-password' ? `>${password}` : w.replaceAll('fullstop:', `${prefix}:`)));
}

describe.skipIf(!up)('the documented ACL', () => {
  let admin: Client;
  let prefix: string;
  let user: string;
  let scene: FleetScene;
  const password = `pw-${Math.random().toString(36).slice(2)}`;

  beforeEach(async () => {
    admin = await client();
    prefix = uniquePrefix();
    user = `fleet-acl-${prefix.replaceAll(':', '-')}`;
    await admin.sendCommand(documentedAcl(user, password, prefix));
    scene = new FleetScene(prefix, async () => {
      const c = createClient({ socket: { host: '127.0.0.1', port: REDIS_PORT }, username: user, password });
      c.on('error', () => {});
      await c.connect();
      return c;
    });
  });

  afterEach(async () => {
    try {
      await scene.cleanup();
    } finally {
      await admin.sendCommand(['ACL', 'DELUSER', user]);
      await dropKeys(admin, prefix);
      await admin.close();
    }
  });

  it('lets two instances run, stop, pend, sweep and answer, and refuses the user every other key and channel', async () => {
    const a = await scene.instance('A');
    const b = await scene.instance('B');
    const h = held();
    const run = a.fleet.run('s1', h.body, { turnId: 't1' });
    await h.started;
    expect(await b.fleet.stop('s1', { timeoutMs: 5000 })).toMatchObject({ outcome: 'stopped', turnId: 't1' });
    expect(await run).toMatchObject({ status: 'cancelled' });
    expect(await b.fleet.stop('s1', { turnId: 't2' })).toMatchObject({ outcome: 'pending' });
    expect(await a.fleet.run('s1', async () => 1, { turnId: 't2' })).toMatchObject({ status: 'cancelled' });
    expect(await b.fleet.sweep()).toBe(0);
    // A question asked on A, answered through B (the answer scripts: GET, SET, DEL, PEXPIRE).
    let asked!: (id: string) => void;
    const questionId = new Promise<string>((r) => { asked = r; });
    a.runner.once('question', (e) => asked(e.questionId));
    const asking = a.fleet.run('s1', (turn) => turn.ask('?'), { turnId: 't3' });
    const id = await questionId;
    await eventually(async () => (await keysUnder(admin, prefix)).some((k) => k.endsWith(':question')), 5000, 'the question record');
    expect(await b.fleet.answer(id, 'yes', { timeoutMs: 5000 })).toMatchObject({ outcome: 'accepted' });
    expect(await asking).toMatchObject({ status: 'completed', value: 'yes' });
    const redis = a.redis as Client;
    await expect(redis.sendCommand(['PUBLISH', 'another-app:node:x', 'forged'])).rejects.toThrow(/NOPERM/);
    await expect(redis.sendCommand(['GET', 'another-app:key'])).rejects.toThrow(/NOPERM/);
    await expect(redis.sendCommand(['EVAL', "return redis.call('LPUSH', KEYS[1], '1')", '1', `${prefix}:x`])).rejects.toThrow(/can't run this command|NOPERM/);
    await expect(redis.sendCommand(['FLUSHALL'])).rejects.toThrow(/NOPERM/);
  });
});

// A stop through Redis on this runtime: a turn runs on instance A (an exec tree in it), the stop is
// posted to instance B, which answers `stopped` with A's report once the tree is gone; closing both
// leaves no lease, no subscriber, no timer, no child. Needs the Redis at 127.0.0.1:6379 (REDIS_PORT).
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createClient } from 'redis';
import { exec, TurnRegistry, TurnRunner } from '../../dist/src/index.js';
import { Fleet } from '../../dist/src/fleet/index.js';
import { assert, check, done, fixture, isGone, noLeaks, treeOfFive } from './harness.mjs';

const port = Number(process.env.REDIS_PORT ?? 6379);
const prefix = `fullstop-runtime:${process.pid}:${randomBytes(4).toString('hex')}`;
const dir = mkdtempSync(join(tmpdir(), 'fullstop-runtime-fleet-'));
const clients = [];

async function client() {
  const c = createClient({ socket: { host: '127.0.0.1', port, connectTimeout: 2000 } });
  c.on('error', () => {});
  await c.connect();
  clients.push(c);
  return c;
}

async function instance(name) {
  const registry = new TurnRegistry();
  const runner = new TurnRunner({ registry });
  const fleet = await Fleet.start({ redis: await client(), runner, nodeId: `${name}-${process.pid}`, prefix, leaseMs: 3000 });
  return { registry, runner, fleet };
}

const raw = await client();
const a = await instance('A');
const b = await instance('B');

check('fleet: a stop posted to another instance stops the turn and its tree through Redis', async () => {
  const pidfile = join(dir, 'tree');
  const run = a.fleet.run('s1', (turn) => turn.tool('tree', {}, (token) => exec('sh', [fixture('exec/tree-of-five.sh'), pidfile], { token })), { turnId: 't1' });
  const pids = await treeOfFive(pidfile);
  const answer = await b.fleet.stop('s1', { reason: 'cancel.user', timeoutMs: 10_000 });
  assert.equal(answer.outcome, 'stopped');
  assert.equal(answer.report.turnId, 't1');
  assert.ok(pids.every(isGone), `alive after the answer: ${pids.filter((p) => !isGone(p))}`);
  assert.equal((await run).status, 'cancelled');
  assert.equal((await b.fleet.turn('s1')).status, 'cancelled');
});

check('fleet: no leaks after close (no lease, no timer, no owned turn, no child)', async () => {
  // Both close before any assertion, so a failed one cannot leave the other's timers holding the process.
  await Promise.all([a.fleet.close(), b.fleet.close()]);
  for (const { fleet, registry } of [a, b]) {
    assert.deepEqual(fleet.stats(), { ownedTurns: 0, waitingStops: 0, retries: 0, timers: 0, openQuestions: 0 });
    await noLeaks(registry);
  }
  assert.equal(await raw.exists(`${prefix}:leases`), 0);
});

try {
  await done('fleet');
} finally {
  // This run's keys go whatever the checks found (SCAN, never KEYS, on the shared server).
  let cursor = '0';
  do {
    const [next, keys] = await raw.sendCommand(['SCAN', cursor, 'MATCH', `${prefix}:*`, 'COUNT', '1000']);
    cursor = next;
    if (keys.length > 0) await raw.sendCommand(['DEL', ...keys]);
  } while (cursor !== '0');
  for (const c of clients) c.destroy();
  rmSync(dir, { recursive: true, force: true });
}

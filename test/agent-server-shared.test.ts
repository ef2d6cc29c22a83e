/**
 * Two agent server processes without sticky sessions: the history in PostgreSQL (`--postgres`),
 * which the event streams read (fullstop/http's `eventStream`), and the fleet in Redis. Any
 * instance serves any request: a session's stream from either (resumed on the other with
 * `Last-Event-ID`), its history from either, a stop and an answer through either.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { liveDescendants } from './support/leaks.js';
import { ServerProcess } from './e2e/server-process.js';
import { keysOf, REDIS_URL, removeKeys, uniquePrefix } from './e2e/fleet-keys.js';
import { dropSchema, POSTGRES_URL, schemaExists, uniqueSchema } from './e2e/pg-schema.js';
import { CLUSTER_PORT, CLUSTER_PORTS, clusterKeysUnder, clusterLock, clusterReachable, dropClusterKeys } from './fixtures/fleet/cluster.js';

const prefix = uniquePrefix('shared');
const schema = uniqueSchema('server');
let a: ServerProcess;
let b: ServerProcess;

beforeAll(async () => {
  const args = (node: string) => ['--redis', REDIS_URL, '--fleet-prefix', prefix, '--postgres', POSTGRES_URL, '--pg-schema', schema, '--node-id', node];
  a = await ServerProcess.start(args('A'));
  b = await ServerProcess.start(args('B'));
});
afterAll(async () => {
  const exits = await Promise.all([a, b].filter(Boolean).map((s) => s.terminate()));
  for (const exit of exits) expect(exit.code).toBe(0);
  await removeKeys(prefix);
  expect(await keysOf(prefix)).toEqual([]);
  await dropSchema(schema);
  expect(await schemaExists(schema)).toBe(false);
  expect(liveDescendants()).toEqual([]);
});

describe('agent servers sharing history (PostgreSQL): the event streams read it', () => {
  it("a turn on A streams to B's client, resumes on A with Last-Event-ID exactly where it was, and either serves its history", async () => {
    const onB = await b.events('shared-1');
    let rest: Awaited<ReturnType<ServerProcess['events']>> | undefined;
    try {
      const { status, body } = await a.post('/api/sessions/shared-1/turns', { prompt: 'tell me something' });
      expect(status).toBe(202);
      // B's client follows A's turn; it drops after a few tokens and reconnects to A.
      await onB.next('say', () => onB.events.filter((e) => e.type === 'say').length >= 5);
      onB.close();
      const seen = [...onB.events];
      expect(seen[0]).toMatchObject({ type: 'turn_started', data: { turnId: body.turnId, input: 'tell me something' } });
      for (const event of seen) expect(event.rawId).toMatch(/^\d+$/);
      rest = await a.events('shared-1', seen.at(-1)!.rawId);
      await rest.next('status', (e) => e.data.status === 'completed' && e.data.turnId === body.turnId);
      // No event twice, none missing: the two streams together are the stream, in order.
      const ids = [...seen, ...rest.events].map((e) => e.rawId).filter((id) => id !== undefined); // live events have none
      expect(new Set(ids).size).toBe(ids.length);
      expect([...ids].sort(byStreamId)).toEqual(ids);
      const history = (await b.get('/api/sessions/shared-1/history')).body.entries as any[];
      const reply = history.filter((e) => e.type === 'say').map((e) => e.text).join('');
      expect([...seen, ...rest.events].filter((e) => e.type === 'say').map((e) => e.data.text).join('')).toBe(reply);
      expect(history.at(-1)).toMatchObject({ type: 'status', status: 'completed', turnId: body.turnId });

      // The stream is the history's: nothing of it is kept in Redis.
      expect((await keysOf(prefix)).filter((key) => key.includes('events'))).toEqual([]);
      // A seq is the only id these servers take.
      const bad = await fetch(new URL('/api/sessions/shared-1/events', b.url), { headers: { 'last-event-id': '12abc' } });
      expect(bad.status).toBe(400);
      expect((await bad.json()).error).toMatch(/^Last-Event-ID: expected an entry's seq/);
    } finally {
      onB.close();
      rest?.close();
    }
  });

  it("a Stop sent to B stops A's turn; the next turn runs on B, and both read one history with the stop's entries", async () => {
    const events = await b.events('shared-2');
    try {
      const first = (await a.post('/api/sessions/shared-2/turns', { prompt: 'shell' })).body.turnId;
      await events.next('tool_call', (e) => e.data.turnId === first);
      expect((await b.post('/api/sessions/shared-2/stop', {})).body).toMatchObject({ outcome: 'stopped', node: 'A', turnId: first });
      await events.next('turn_aborted', (e) => e.data.turnId === first, 5000);
      const second = await b.post('/api/sessions/shared-2/turns', { prompt: 'hello' });
      expect(second.status).toBe(202);
      await events.next('status', (e) => e.data.status === 'completed' && e.data.turnId === second.body.turnId);
      // Either instance reads the whole history, the stop's entries included, in one order.
      const [fromA, fromB] = await Promise.all([a, b].map(async (s) => (await s.get('/api/sessions/shared-2/history')).body.entries as any[]));
      expect(fromA).toEqual(fromB);
      expect(fromA.filter((e) => e.turnId === first).map((e) => e.type)).toEqual(expect.arrayContaining(['tool_aborted', 'turn_aborted']));
      expect(fromA.filter((e) => e.type === 'status').map((e) => e.status)).toEqual(['cancelling', 'cancelled', 'completed']);
    } finally {
      events.close();
    }
  });

  it('a question asked on A is answered through B; a second answer through A is refused as already answered', async () => {
    const events = await a.events('shared-3');
    try {
      const { body } = await a.post('/api/sessions/shared-3/turns', { prompt: 'ask' });
      const question = await events.next('question', (e) => e.data.turnId === body.turnId);
      const { questionId } = question.data;
      expect(await b.post(`/api/questions/${questionId}/answer`, { answer: 'yes' })).toEqual({
        status: 200, body: { accepted: true, outcome: 'accepted', questionId, node: 'A' },
      });
      expect((await a.post(`/api/questions/${questionId}/answer`, { answer: 'no' })).body).toMatchObject({ accepted: false, outcome: 'already_answered' });
      await events.next('status', (e) => e.data.status === 'completed' && e.data.turnId === body.turnId);
      expect(events.events.filter((e) => e.type === 'say').map((e) => e.data.text).join('')).toContain('"answer":"yes"');
      expect((await b.post('/api/questions/q-nobody-asked/answer', { answer: 'yes' })).body).toMatchObject({ accepted: false, outcome: 'not_found' });
    } finally {
      events.close();
    }
  });
});

// Redis and PostgreSQL are all `npm test` needs; the cluster specs skip without a cluster, as fleet-cluster's do.
const clusterUp = await clusterReachable();
if (!clusterUp) console.warn(`agent-server-shared cluster tests skipped: no Redis Cluster at 127.0.0.1:${CLUSTER_PORT}-${CLUSTER_PORT + 5} (start one with: bash scripts/redis-cluster.sh start; CI always has it)`);

describe.skipIf(!clusterUp)('the same over Redis Cluster', () => {
  const clusterPrefix = uniquePrefix('shared-cluster');
  let c: ServerProcess;
  let d: ServerProcess;
  let unlock: () => Promise<void>;

  beforeAll(async () => {
    unlock = await clusterLock('shared');
    const args = (node: string) => ['--redis-cluster', CLUSTER_PORTS.map((p) => `127.0.0.1:${p}`).join(','), '--fleet-prefix', clusterPrefix,
      '--postgres', POSTGRES_URL, '--pg-schema', schema, '--node-id', node];
    c = await ServerProcess.start(args('C'));
    d = await ServerProcess.start(args('D'));
  });
  afterAll(async () => {
    const exits = await Promise.all([c, d].filter(Boolean).map((s) => s.terminate()));
    for (const exit of exits) expect(exit.code).toBe(0);
    await dropClusterKeys(clusterPrefix);
    expect(await clusterKeysUnder(clusterPrefix)).toEqual([]);
    await unlock?.();
  });

  it("C's turn streams to D's client, resumes on C with Last-Event-ID, and a Stop through D stops it", async () => {
    const onD = await d.events('cluster-1');
    let rest: Awaited<ReturnType<ServerProcess['events']>> | undefined;
    try {
      const { body } = await c.post('/api/sessions/cluster-1/turns', { prompt: 'shell' });
      await onD.next('say', () => onD.events.filter((e) => e.type === 'say').length >= 3);
      onD.close();
      const seen = [...onD.events];
      rest = await c.events('cluster-1', seen.at(-1)!.rawId);
      await rest.next('tool_call', (e) => e.data.turnId === body.turnId);
      expect((await d.post('/api/sessions/cluster-1/stop', {})).body).toMatchObject({ outcome: 'stopped', node: 'C', turnId: body.turnId });
      await rest.next('turn_aborted', (e) => e.data.turnId === body.turnId, 5000);
      const all = [...seen, ...rest.events];
      const ids = all.map((e) => e.rawId).filter((id) => id !== undefined); // live events (progress) have none
      expect(new Set(ids).size).toBe(ids.length);
      expect([...ids].sort(byStreamId)).toEqual(ids);
      const history = (await d.get('/api/sessions/cluster-1/history')).body.entries as any[];
      expect(all.filter((e) => e.type === 'say').map((e) => e.data.text).join('')).toBe(history.filter((e) => e.type === 'say').map((e) => e.text).join(''));
    } finally {
      onD.close();
      rest?.close();
    }
  });
});

/** Event ids (the history's seqs) in order. */
function byStreamId(x: string, y: string): number {
  return Number(x) - Number(y);
}

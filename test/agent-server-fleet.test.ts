/**
 * Two agent server processes joined in one fleet over Redis (`--redis`): a stop sent to the
 * instance that does not run the turn reaches the one that does.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer, type AddressInfo } from 'node:net';
import { TcpProxy } from './support/tcp-proxy.js';
import { eventually, isGone, liveDescendants } from './support/leaks.js';
import { ServerProcess, toolTree } from './e2e/server-process.js';
import { keysOf, REDIS_URL, removeKeys, uniquePrefix } from './e2e/fleet-keys.js';

const prefix = uniquePrefix('server');
let a: ServerProcess;
let b: ServerProcess;

beforeAll(async () => {
  [a, b] = await Promise.all(['A', 'B'].map((node) => ServerProcess.start(['--redis', REDIS_URL, '--node-id', node, '--fleet-prefix', prefix])));
});
afterAll(async () => {
  const exits = await Promise.all([a, b].filter(Boolean).map((s) => s.terminate()));
  for (const exit of exits) expect(exit.code).toBe(0);
  await removeKeys(prefix);
});

describe('agent server fleet', () => {
  it('a stop posted to B stops the shell turn running on A: cancelled on A, its process tree gone', async () => {
    const events = await a.events('fleet-1');
    try {
      const { status, body } = await a.post('/api/sessions/fleet-1/turns', { prompt: 'shell' });
      expect(status).toBe(202);
      await events.next('tool_call');
      await eventually(() => toolTree(a.pid).length === 3, 10_000, 'sh and two sleeps on A');
      const tree = toolTree(a.pid);
      // The session's turn runs on A: B refuses a second one.
      const busy = await b.post('/api/sessions/fleet-1/turns', { prompt: 'hi' });
      expect(busy.status).toBe(409);
      expect(busy.body.error).toMatch(/already has a running turn \(turn-.*\) on node A/);

      const stop = await b.post('/api/sessions/fleet-1/stop', {});
      expect(stop.status).toBe(200);
      expect(stop.body).toMatchObject({ outcome: 'stopped', sessionId: 'fleet-1', turnId: body.turnId, node: 'A', report: { reason: 'cancel.user' } });
      const aborted = await events.next('turn_aborted', (e) => e.data.turnId === body.turnId, 2000);
      expect(aborted.data.reason).toBe('cancel.user');
      expect((await a.get(`/api/sessions/fleet-1/turns/${body.turnId}/report`)).body).toEqual(stop.body.report);
      for (const pid of tree) expect(isGone(pid), `pid ${pid}`).toBe(true);
      expect(liveDescendants(b.pid)).toEqual([]);

      // The turn is over everywhere: a repeat stop says so, and either instance may run the next turn.
      expect((await b.post('/api/sessions/fleet-1/stop', {})).body).toMatchObject({ outcome: 'already_finished', turnId: body.turnId, status: 'cancelled' });
      const next = await b.post('/api/sessions/fleet-1/turns', { prompt: 'hello from B' });
      expect(next.status).toBe(202);
      const onB = await b.events('fleet-1');
      try {
        await onB.next('status', (e) => e.data.status === 'completed' && e.data.turnId === next.body.turnId);
      } finally {
        onB.close();
      }
      // The fleet records a turn's end after its terminal event: allow it a moment (liveness only).
      for (const server of [a, b]) {
        let stats: any;
        for (const deadline = Date.now() + 5000; Date.now() < deadline;) {
          stats = (await server.get('/healthz')).body.stats;
          if (stats.runningTurns === 0 && stats.fleet.ownedTurns === 0) break;
        }
        expect(stats.registry).toEqual({ liveTokens: 0, liveSlots: 0, liveBridges: 0, liveOwners: 0 });
        expect(stats.runningTurns).toBe(0);
        expect(stats.fleet).toMatchObject({ ownedTurns: 0, waitingStops: 0, retries: 0 });
      }
      expect((await keysOf(prefix)).length).toBeGreaterThan(0);
    } finally {
      events.close();
    }
  });

  it("a Send the fleet refuses before its turn starts is answered with the refusal, not a 202 for a turn that never runs", async () => {
    const events = await a.events('fleet-dup-a');
    try {
      const { body } = await a.post('/api/sessions/fleet-dup-a/turns', { prompt: 'ask' });
      await events.next('question', (e) => e.data.turnId === body.turnId);
      // The same turn id for another session, through B: the fleet refuses it (it runs on A).
      const again = await b.post('/api/sessions/fleet-dup-b/turns', { prompt: 'hi', turnId: body.turnId });
      expect(again.status).toBe(409);
      expect(again.body.error).toMatch(/^turn: not started: /);
      expect((await b.get('/healthz')).body.stats).toMatchObject({ runningTurns: 0, sessions: 0 });
      // B's session is free: its own next turn runs.
      const own = await b.post('/api/sessions/fleet-dup-b/turns', { prompt: 'hello' });
      expect(own.status).toBe(202);
      expect((await a.post('/api/sessions/fleet-dup-a/stop', {})).body.outcome).toBe('stopped');
      const onB = await b.events('fleet-dup-b');
      try {
        await onB.next('status', (e) => e.data.turnId === own.body.turnId && e.data.status === 'completed');
      } finally {
        onB.close();
      }
    } finally {
      events.close();
    }
  });

  it('a stop for a session no instance knows answers not_found', async () => {
    expect(await b.post('/api/sessions/fleet-nobody/stop', {})).toEqual({ status: 200, body: { outcome: 'not_found', sessionId: 'fleet-nobody' } });
  });
  it('with Redis unreachable: a turn is refused with 503, a stop answers relay_unavailable, and SIGTERM still exits 0', async () => {
    const closed = await freePort();
    const lonely = await ServerProcess.start(['--redis', `redis://127.0.0.1:${closed}`, '--node-id', 'C', '--fleet-prefix', prefix]);
    try {
      const turn = await lonely.post('/api/sessions/fleet-down/turns', { prompt: 'hi' });
      expect(turn.status).toBe(503);
      expect(turn.body.error).toMatch(/^fleet: Redis cannot be reached/);
      const stop = await lonely.post('/api/sessions/fleet-down/stop', {});
      expect(stop.status).toBe(503);
      expect(stop.body).toMatchObject({ outcome: 'relay_unavailable', sessionId: 'fleet-down', error: expect.stringMatching(/Redis/) });
    } finally {
      expect((await lonely.terminate()).code).toBe(0);
    }
  });
  it('with Redis gone mid-turn, a stop sent to the instance running the turn still stops it there', async () => {
    const relay = await TcpProxy.start(6379);
    const local = await ServerProcess.start(['--redis', `redis://127.0.0.1:${relay.port}`, '--node-id', 'D', '--fleet-prefix', prefix]);
    const events = await local.events('fleet-cut');
    try {
      const { body } = await local.post('/api/sessions/fleet-cut/turns', { prompt: 'shell' });
      await events.next('tool_call');
      await eventually(() => toolTree(local.pid).length === 3, 10_000, 'sh and two sleeps');
      const tree = toolTree(local.pid);
      relay.refuse();
      const stop = await local.post('/api/sessions/fleet-cut/stop', {});
      expect(stop.status).toBe(200);
      expect(stop.body).toMatchObject({ outcome: 'stopped', turnId: body.turnId, relay: expect.stringMatching(/Redis/) });
      await events.next('turn_aborted', (e) => e.data.turnId === body.turnId, 2000);
      for (const pid of tree) expect(isGone(pid), `pid ${pid}`).toBe(true);
    } finally {
      events.close();
      expect((await local.terminate()).code).toBe(0);
      await relay.close();
    }
  });
});

/** A port nothing listens on (bound, then released). */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}


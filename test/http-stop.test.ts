/**
 * `stopResponse` behind a plain Node http server (through `toRequest`/`sendResponse`), asked by
 * `fetch`: each outcome of the one vocabulary with its status, alone (`runner.requestStop`) and
 * through a fleet on the Redis of CI (`fleet.stop`), and the bad bodies it refuses.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { TurnRegistry, TurnRunner, type Turn } from '../dist/src/index.js';
import { Fleet } from '../dist/src/fleet/index.js';
import { STOP_STATUS, stopResponse, type FleetStopper } from '../dist/src/http/index.js';
import { serve, type Served } from './support/http.js';
import { eventually } from './support/leaks.js';
import { client, dropKeys, RedisProxy, redisReachable, REDIS_PORT, uniquePrefix, type Client } from './fixtures/fleet/support.js';

const up = await redisReachable();
const servers: Served[] = [];
afterEach(async () => { await Promise.all(servers.splice(0).map((s) => s.close())); });

/** `POST /sessions/:id/stop` and `POST /sessions/:id/turns/:turnId/stop`, routed by hand (no framework). */
async function stopServer(target: TurnRunner | FleetStopper, maxBodyBytes?: number, runner?: TurnRunner): Promise<Served> {
  const served = await serve((request) => {
    const [, , sessionId, , turnId] = new URL(request.url).pathname.split('/');
    return stopResponse(target, request, {
      sessionId, ...(turnId === undefined ? {} : { turnId }), ...(maxBodyBytes === undefined ? {} : { maxBodyBytes }), ...(runner === undefined ? {} : { runner }),
    });
  });
  servers.push(served);
  return served;
}

const post = async (url: string, body?: string, headers: Record<string, string> = { 'content-type': 'application/json' }) => {
  const response = await fetch(url, { method: 'POST', headers, ...(body === undefined ? {} : { body }) });
  return { status: response.status, body: await response.json(), headers: response.headers };
};

/** A body that runs until its turn is stopped. */
function held(): { body: (turn: Turn) => Promise<string>; started: Promise<void> } {
  let started!: () => void;
  return {
    started: new Promise<void>((r) => { started = r; }),
    body: async (turn) => {
      started();
      await new Promise((r) => turn.signal.addEventListener('abort', r, { once: true }));
      return 'stopped';
    },
  };
}

describe('stopResponse with a runner', () => {
  it('answers stopped (200, with the report), not_found, already_finished (200), pending (202) and refused (429)', async () => {
    const registry = new TurnRegistry();
    const runner = new TurnRunner({ registry, graceMs: 50 });
    const { url } = await stopServer(runner);
    expect(await post(`${url}/sessions/s1/stop`, '{}')).toMatchObject({ status: 200, body: { outcome: 'not_found', sessionId: 's1' } });

    const turn = held();
    const outcome = runner.run('s1', turn.body, { turnId: 't1' });
    await turn.started;
    const stopped = await post(`${url}/sessions/s1/stop`, JSON.stringify({ reason: 'cancel.client' }));
    expect(stopped).toMatchObject({ status: 200, body: { outcome: 'stopped', sessionId: 's1', turnId: 't1', report: { reason: 'cancel.client', turnId: 't1' } } });
    expect((await outcome).status).toBe('cancelled');
    expect(await post(`${url}/sessions/s1/turns/t1/stop`)).toMatchObject({ status: 200, body: { outcome: 'already_finished', turnId: 't1', status: 'cancelled' } });

    const pending = await post(`${url}/sessions/s1/stop`, JSON.stringify({ turnId: 'later' }));
    expect(pending).toMatchObject({ status: 202, body: { outcome: 'pending', sessionId: 's1', turnId: 'later', reason: 'cancel.user' } });
    let ran = false;
    expect((await runner.run('s1', async () => { ran = true; }, { turnId: 'later' })).status).toBe('cancelled');
    expect(ran).toBe(false);

    const strict = new TurnRunner({ registry, pendingStopMs: 0 });
    const { url: strictUrl } = await stopServer(strict);
    expect(await post(`${strictUrl}/sessions/s1/turns/never/stop`)).toMatchObject({ status: 429, body: { outcome: 'refused', turnId: 'never', why: 'disabled' } });
    expect(registry.stats()).toEqual({ liveTokens: 0, liveSlots: 0, liveBridges: 0, liveOwners: 0 });
  });

  it('refuses a body that is not JSON, not an object, of bad fields or disagreeing with the route (400), or too large (413)', async () => {
    const runner = new TurnRunner({ registry: new TurnRegistry() });
    const { url } = await stopServer(runner, 1024);
    const bad = [
      ['{not json', /^request body: invalid JSON/],
      ['[1]', /^request body: expected a JSON object/],
      ['{"reason":5}', /^reason: expected a string/],
      ['{"turnId":true}', /^turnId: expected a string/],
      ['{"reason":""}', /^options\.reason: expected a non-empty string/],
    ] as const;
    for (const [body, error] of bad) {
      const answer = await post(`${url}/sessions/s1/stop`, body);
      expect(answer.status, body).toBe(400);
      expect(answer.body.error).toMatch(error);
    }
    expect((await post(`${url}/sessions/s1/turns/t1/stop`, '{"turnId":"t2"}')).body.error).toMatch(/^turnId: the body's/);
    const declared = await post(`${url}/sessions/s1/stop`, JSON.stringify({ reason: 'x'.repeat(2000) }));
    expect(declared).toMatchObject({ status: 413, body: { error: 'request body: over 1024 bytes' } });
    // No content-length: a streamed body is read only to the bound.
    const streamed = new ReadableStream<Uint8Array>({
      start(c) { for (let i = 0; i < 4; i++) c.enqueue(new TextEncoder().encode(' '.repeat(512))); c.close(); },
    });
    const response = await fetch(`${url}/sessions/s1/stop`, { method: 'POST', body: streamed, duplex: 'half' } as RequestInit);
    expect(response.status).toBe(413);
    await response.body?.cancel();
  });

  it('answers a fleet\'s cancelling (202) and interrupted (200) as they are', async () => {
    // The owner has not confirmed in time / its lease ran out: words only a fleet says, given here by a stand-in.
    for (const [outcome, status] of [['cancelling', 202], ['interrupted', 200]] as const) {
      const stopper: FleetStopper = { stop: async (sessionId, options) => ({ outcome, sessionId, turnId: options?.turnId ?? 't1', epoch: 1, node: 'A' }) };
      const { url } = await stopServer(stopper);
      expect(await post(`${url}/sessions/s1/stop`, '{}')).toMatchObject({ status, body: { outcome, sessionId: 's1', turnId: 't1', node: 'A' } });
    }
    expect(STOP_STATUS).toMatchObject({ cancelling: 202, interrupted: 200 });
  });
});

describe.skipIf(!up)('stopResponse with a fleet', () => {
  let prefix: string;
  const clients: Client[] = [];
  const fleets: Fleet[] = [];
  afterEach(async () => {
    for (const fleet of fleets.splice(0)) await fleet.close();
    const raw = await client();
    await dropKeys(raw, prefix);
    await raw.close();
    for (const c of clients.splice(0)) c.destroy();
  });

  async function instance(name: string, registry: TurnRegistry, port = REDIS_PORT) {
    const redis = await client(port);
    clients.push(redis);
    const runner = new TurnRunner({ registry, graceMs: 50 });
    const fleet = await Fleet.start({ redis, runner, nodeId: `${name}-${prefix}`, prefix, leaseMs: 3000 });
    fleets.push(fleet);
    return { runner, fleet, redis };
  }

  it('a Stop sent to B stops the turn running on A (200 stopped with A\'s report); pending 202; a closed fleet 503', async () => {
    prefix = uniquePrefix();
    const registry = new TurnRegistry();
    const a = await instance('A', registry);
    const b = await instance('B', registry);
    const { url } = await stopServer(b.fleet);
    const turn = held();
    const outcome = a.fleet.run('s1', turn.body, { turnId: 't1' });
    await turn.started;
    const stopped = await post(`${url}/sessions/s1/stop`, '{}');
    expect(stopped).toMatchObject({ status: 200, body: { outcome: 'stopped', sessionId: 's1', turnId: 't1', node: `A-${prefix}`, report: { reason: 'cancel.user' } } });
    expect((await outcome).status).toBe('cancelled');
    expect(await post(`${url}/sessions/s1/turns/t9/stop`)).toMatchObject({ status: 202, body: { outcome: 'pending', turnId: 't9' } });
    await b.fleet.close();
    const away = await post(`${url}/sessions/s1/stop`, '{}');
    expect(away).toMatchObject({ status: 503, body: { outcome: 'relay_unavailable', sessionId: 's1', error: 'Fleet.stop: the fleet is closed' } });
    expect(away.headers.get('retry-after')).toBe('1');
    expect(registry.stats()).toEqual({ liveTokens: 0, liveSlots: 0, liveBridges: 0, liveOwners: 0 });
  });

  it('Redis away: a turn running on this instance is still stopped here when the runner is given (200 stopped, with relay)', async () => {
    prefix = uniquePrefix();
    const proxy = await RedisProxy.start();
    try {
      const registry = new TurnRegistry();
      const a = await instance('A', registry, proxy.port);
      const { url } = await stopServer(a.fleet, undefined, a.runner);
      const turn = held();
      const outcome = a.fleet.run('s1', turn.body, { turnId: 't1' });
      await turn.started;
      proxy.refuse();
      await eventually(() => !a.redis.isReady, 5000, 'Redis to be away');
      const answer = await post(`${url}/sessions/s1/turns/t1/stop`, '{}');
      expect(answer).toMatchObject({ status: 200, body: { outcome: 'stopped', sessionId: 's1', turnId: 't1', report: { reason: 'cancel.user' } } });
      expect(answer.body.relay).toMatch(/^Fleet\.stop: /);
      expect((await outcome).status).toBe('cancelled');
      // Nothing running here: the fleet's answer stands (503).
      expect(await post(`${url}/sessions/s2/stop`, '{}')).toMatchObject({ status: 503, body: { outcome: 'relay_unavailable' } });
      proxy.pass();
      await eventually(() => a.redis.isReady, 5000, 'Redis to be back');
      expect(registry.stats()).toEqual({ liveTokens: 0, liveSlots: 0, liveBridges: 0, liveOwners: 0 });
    } finally {
      await proxy.close();
    }
  });

  it('a stop-only client (Fleet.connect: a gateway that runs no turns) answers through stopResponse as a fleet does', async () => {
    prefix = uniquePrefix();
    const registry = new TurnRegistry();
    const a = await instance('A', registry);
    const redis = await client();
    clients.push(redis);
    const gateway = await Fleet.connect({ redis, prefix, nodeId: `gw-${prefix}` });
    try {
      const { url } = await stopServer(gateway);
      const turn = held();
      const outcome = a.fleet.run('s1', turn.body, { turnId: 't1' });
      await turn.started;
      expect(await post(`${url}/sessions/s1/stop`, JSON.stringify({ reason: 'cancel.client' }))).toMatchObject({
        status: 200, body: { outcome: 'stopped', sessionId: 's1', turnId: 't1', node: `A-${prefix}`, report: { reason: 'cancel.client' } },
      });
      expect((await outcome).status).toBe('cancelled');
      expect(await post(`${url}/sessions/s1/stop`, '{}')).toMatchObject({ status: 200, body: { outcome: 'already_finished' } });
    } finally {
      await gateway.close();
    }
    expect(registry.stats()).toEqual({ liveTokens: 0, liveSlots: 0, liveBridges: 0, liveOwners: 0 });
  });
});


/**
 * The agent server's bounds with --postgres (event streams through Redis Streams): a client that
 * never reads is dropped as without Redis, open streams are capped, and the streams in Redis are
 * bounded in total (session ids are the clients' own, so a bound per session bounds nothing).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { createClient } from 'redis';
import { RedisEvents, STREAM_TTL_MS, type EventsRedis } from '../dist/examples/agent-server/redis-events.js';
import { MAX_CLIENT_BACKLOG_BYTES } from '../dist/examples/agent-server/streams.js';
import { EventStream, ServerProcess } from './e2e/server-process.js';
import { keysOf, REDIS_URL, removeKeys, uniquePrefix } from './e2e/fleet-keys.js';
import { dropSchema, POSTGRES_URL, schemaExists, uniqueSchema } from './e2e/pg-schema.js';
import { liveDescendants } from './support/leaks.js';

const prefix = uniquePrefix('bounds');
type Client = ReturnType<typeof createClient>;
let redis: Client;
const cleanups: (() => Promise<unknown> | void)[] = [];

beforeAll(async () => {
  redis = createClient({ url: REDIS_URL });
  await redis.connect();
});
afterAll(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  await removeKeys(prefix);
  expect(await keysOf(prefix)).toEqual([]);
  redis.destroy();
});

/** A RedisEvents under its own prefix, and an HTTP server whose every request follows the session in its path. */
async function instance(sub: string, maxStreams?: number): Promise<{ events: RedisEvents; url: string; http: Server }> {
  const subscriber = redis.duplicate();
  await subscriber.connect();
  const events = new RedisEvents(redis as unknown as EventsRedis, subscriber as unknown as EventsRedis, `${prefix}:${sub}`, { maxStreams });
  const http = createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(': following\n\n'); // the headers go out now, as the server's first line does
    void events.follow(new URL(req.url!, 'http://x').pathname.slice(1), res, RedisEvents.lastEventId(req.headers['last-event-id']));
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  cleanups.push(async () => {
    events.endAll();
    http.closeAllConnections();
    await new Promise((resolve) => http.close(resolve));
    subscriber.destroy();
  });
  return { events, http, url: `http://127.0.0.1:${(http.address() as AddressInfo).port}/` };
}

/** Polls `check` until it returns true (a liveness bound only). */
async function until(what: string, check: () => boolean | Promise<boolean>, ms = 30_000): Promise<void> {
  for (const deadline = Date.now() + ms; !(await check());) {
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe('event streams through Redis: bounds', () => {
  it('drops a client that never reads once its backlog passes the bound, while a client that reads gets every event', async () => {
    const { events, http } = await instance('drop');
    const { port } = http.address() as AddressInfo;
    // A client that sends its request, then reads nothing: the kernel's buffers fill, then the server's.
    const silent: Socket = connect(port, '127.0.0.1');
    silent.on('error', () => {});
    const silentClosed = new Promise<void>((resolve) => silent.once('close', () => resolve()));
    await new Promise<void>((resolve) => silent.once('connect', () => resolve()));
    silent.write(`GET /s-drop HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\n\r\n`);
    silent.pause();
    const reader = await EventStream.open(new URL(`http://127.0.0.1:${port}/s-drop`));
    cleanups.push(() => { reader.close(); silent.destroy(); });
    await until('both clients to follow', () => events.count === 2);
    // 400 events of 60 KB (24 MB, far past the socket buffers and the 2 MiB bound), as a turn
    // sends them: ten at a time, each ten once the reader has them (so they are live events).
    const blob = 'x'.repeat(60_000);
    for (let n = 0; n < 400; n++) {
      events.publish('s-drop', 'say', { turnId: 't', n, text: blob, last: n === 399 });
      if (n % 10 === 9) await reader.next('say', (e) => e.data.n === n, 20_000);
    }
    await until('the silent client to be dropped', () => events.count === 1);
    // Its connection is closed: it sees the end once it reads what its kernel buffer holds.
    silent.resume();
    await silentClosed;
    expect(events.dropped).toBe(1);
    // The reader got all 400, in order.
    expect(reader.events.map((e) => e.data.n)).toEqual(Array.from({ length: 400 }, (_, n) => n));
    expect(MAX_CLIENT_BACKLOG_BYTES).toBe(2 * 1024 * 1024);
  }, 90_000);

  it('keeps at most maxStreams sessions\' streams in Redis: past it the least recently written ones are deleted; each expires when idle', async () => {
    const { events } = await instance('total', 3);
    for (let s = 1; s <= 5; s++) {
      events.publish(`s-${s}`, 'say', { turnId: 't', text: `event of s-${s}` });
      // One session at a time, so "least recently written" is s-1, then s-2.
      await until(`s-${s} indexed`, async () => (await redis.zScore(events.indexKey, `s-${s}`)) !== null);
    }
    await until('the index trimmed to 3', async () => (await redis.zCard(events.indexKey)) === 3);
    await until('the oldest streams deleted', async () => (await redis.exists([events.key('s-1'), events.key('s-2')])) === 0);
    expect(await redis.zRange(events.indexKey, 0, -1)).toEqual(['s-3', 's-4', 's-5']);
    for (const s of [3, 4, 5]) {
      expect(await redis.xLen(events.key(`s-${s}`))).toBe(1);
      const ttl = await redis.pTTL(events.key(`s-${s}`));
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(STREAM_TTL_MS);
    }
    const indexTtl = await redis.pTTL(events.indexKey);
    expect(indexTtl).toBeGreaterThan(0);
    expect(indexTtl).toBeLessThanOrEqual(STREAM_TTL_MS);
    // A session written again is the most recent: the next new one deletes s-4, not s-3.
    events.publish('s-3', 'say', { turnId: 't', text: 'again' });
    await until('s-3 written again', async () => (await redis.xLen(events.key('s-3'))) === 2);
    events.publish('s-6', 'say', { turnId: 't', text: 'new' });
    await until('s-4 deleted', async () => (await redis.exists(events.key('s-4'))) === 0);
    expect(await redis.zRange(events.indexKey, 0, -1)).toEqual(['s-5', 's-3', 's-6']);
  });
});

describe('agent server with --postgres: open streams are capped', () => {
  const schema = uniqueSchema('bounds');
  let server: ServerProcess;
  beforeAll(async () => {
    server = await ServerProcess.start(['--redis', REDIS_URL, '--fleet-prefix', `${prefix}:srv`, '--postgres', POSTGRES_URL, '--pg-schema', schema, '--node-id', 'bounds', '--max-streams', '3']);
  });
  afterAll(async () => {
    if (server !== undefined) expect((await server.terminate()).code, server.output).toBe(0);
    await dropSchema(schema);
    expect(await schemaExists(schema)).toBe(false);
    expect(liveDescendants()).toEqual([]);
  });

  it('refuses a stream past --max-streams with 503 (and retry-after) until one closes', async () => {
    const open = await Promise.all(['a', 'b', 'c'].map((s) => server.events(`cap-${s}`)));
    try {
      const refused = await fetch(new URL('/api/sessions/cap-d/events', server.url));
      expect(refused.status).toBe(503);
      expect(refused.headers.get('retry-after')).toBe('5');
      expect((await refused.json()).error).toBe('events: 3 event streams are open, the most this server keeps; try again later');
      open.shift()!.close();
      await until('a stream to close', async () => (await server.get('/healthz')).body.stats.sseClients === 2);
      const next = await server.events('cap-d');
      open.push(next);
      expect((await server.get('/healthz')).body.stats.sseClients).toBe(3);
    } finally {
      for (const stream of open) stream.close();
    }
  });
});

/**
 * The agent server's event streams through Redis Streams (examples/agent-server/redis-events.ts)
 * against the real Redis: a session's stream is capped, a new client gets the newest events within
 * the in-memory log's bounds, and a client resumes from any id, on any instance.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createClient } from 'redis';
import { RedisEvents, STREAM_MAX_EVENTS, type EventsRedis } from '../dist/examples/agent-server/redis-events.js';
import { MAX_EVENT_BYTES, MAX_LOG_BYTES } from '../dist/examples/agent-server/event-log.js';
import { EventStream } from './e2e/server-process.js';
import { keysOf, REDIS_URL, removeKeys, uniquePrefix } from './e2e/fleet-keys.js';

const prefix = uniquePrefix('events');
type Client = ReturnType<typeof createClient>;
let redis: Client;
const instances: { events: RedisEvents; subscriber: Client; http: Server; url: string }[] = [];

/** One instance: its subscriber and an HTTP server whose every request follows a session. */
async function instance(): Promise<(typeof instances)[number]> {
  const subscriber = redis.duplicate();
  await subscriber.connect();
  const events = new RedisEvents(redis as unknown as EventsRedis, subscriber as unknown as EventsRedis, prefix);
  const http = createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    void events.follow(new URL(req.url!, 'http://x').pathname.slice(1), res, RedisEvents.lastEventId(req.headers['last-event-id']));
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  const made = { events, subscriber, http, url: `http://127.0.0.1:${(http.address() as AddressInfo).port}/` };
  instances.push(made);
  return made;
}

beforeAll(async () => {
  redis = createClient({ url: REDIS_URL });
  await redis.connect();
});
afterAll(async () => {
  for (const { events, subscriber, http } of instances) {
    events.endAll();
    http.closeAllConnections();
    await new Promise((resolve) => http.close(resolve));
    subscriber.destroy();
  }
  await removeKeys(prefix);
  expect(await keysOf(prefix)).toEqual([]);
  redis.destroy();
});

/** Waits until the session's stream ends with an event whose data has `last: true` (Redis has taken every publish before it). */
async function settled(events: RedisEvents, sessionId: string): Promise<void> {
  for (const deadline = Date.now() + 20_000; Date.now() < deadline;) {
    const [entry] = await redis.xRevRange(events.key(sessionId), '+', '-', { COUNT: 1 });
    if (entry !== undefined && JSON.parse(entry.message.data).last === true) return;
    await new Promise((resolve) => setImmediate(resolve));
  }
  throw new Error('the stream never got its last event');
}

describe('event streams through Redis Streams', () => {
  it('refuses (400) a Last-Event-ID that Redis would refuse, a part past 2^64 − 1 or the very last id, instead of ending the stream and counting a relay failure', async () => {
    const a = await instance();
    a.events.publish('ids', 'say', { turnId: 't1', text: 'x', last: true });
    await settled(a.events, 'ids');
    const key = a.events.key('ids');
    const max = '18446744073709551615';
    for (const id of ['99999999999999999999', '18446744073709551616', '18446744073709551616-0', `1-${BigInt(max) + 1n}`, `${max}-${max}`]) {
      // What the stream would meet: XRANGE refuses it.
      await expect(redis.xRange(key, `(${id}`, '+')).rejects.toThrow(/ERR/);
      let refused: unknown;
      try { RedisEvents.lastEventId(id); } catch (error) { refused = error; }
      expect(refused, id).toMatchObject({ status: 400, message: expect.stringMatching(/^Last-Event-ID: /) });
    }
    // The largest ids Redis takes are still taken, and read nothing after them.
    for (const id of [max, `${max}-${BigInt(max) - 1n}`, '0', '0-0']) {
      expect(RedisEvents.lastEventId(id)).toBe(id);
      await redis.xRange(key, `(${id}`, '+');
    }
    expect(a.events.failures).toBe(0);
  });

  it(`caps a session's stream near ${STREAM_MAX_EVENTS} entries; a new client gets the newest, in order, then live ones`, async () => {
    const a = await instance();
    const b = await instance();
    const total = STREAM_MAX_EVENTS + 1500;
    for (let i = 1; i <= total; i++) a.events.publish('capped', 'say', { turnId: 't1', text: `${i} `, last: i === total });
    await settled(a.events, 'capped');
    const length = await redis.xLen(a.events.key('capped'));
    expect(length).toBeGreaterThanOrEqual(STREAM_MAX_EVENTS);
    expect(length).toBeLessThanOrEqual(STREAM_MAX_EVENTS + 200); // MAXLEN ~ trims whole nodes (100 entries each)

    const stream = await EventStream.open(new URL('capped', b.url));
    try {
      await stream.next('say', (e) => e.data.last === true);
      const numbers = stream.events.map((e) => Number(e.data.text));
      expect(numbers.length).toBe(Math.min(length, STREAM_MAX_EVENTS));
      expect(numbers.at(-1)).toBe(total);
      expect(numbers.every((n, i) => i === 0 || n === numbers[i - 1] + 1)).toBe(true);
      // Live: an event published on A after the replay reaches B's client.
      a.events.publish('capped', 'turn_completed', { turnId: 't1', value: 'done' });
      expect((await stream.next('turn_completed')).data.value).toBe('done');
    } finally {
      stream.close();
    }
  });

  it('placing a new client reads from Redis about the in-memory log\'s bytes, not the whole stream, however big its events', async () => {
    const a = await instance();
    const big = 'x'.repeat(60 * 1024);
    for (let i = 1; i <= 100; i++) a.events.publish('heavy', 'tool_output', { turnId: 't3', callId: `c${i}`, output: big, last: i === 100 });
    await settled(a.events, 'heavy');
    // An instance whose reads are counted: bytes of the entries XREVRANGE brings back.
    let fetched = 0;
    const counting = Object.create(redis) as Client;
    counting.xRevRange = (async (...args: Parameters<Client['xRevRange']>) => {
      const entries = await redis.xRevRange(...args);
      for (const e of entries) fetched += Buffer.byteLength(e.message.data);
      return entries;
    }) as Client['xRevRange'];
    const subscriber = redis.duplicate();
    await subscriber.connect();
    const events = new RedisEvents(counting as unknown as EventsRedis, subscriber as unknown as EventsRedis, prefix);
    const http = createServer((req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(': hello\n\n');
      void events.follow('heavy', res, undefined);
    });
    await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
    instances.push({ events, subscriber, http, url: '' });
    const stream = await EventStream.open(new URL(`http://127.0.0.1:${(http.address() as AddressInfo).port}/`));
    try {
      await stream.next('tool_output', (e) => e.data.last === true);
      expect(stream.events.length).toBeGreaterThan(10);
      expect(fetched).toBeLessThanOrEqual(MAX_LOG_BYTES + 20 * MAX_EVENT_BYTES);
    } finally {
      stream.close();
    }
  });

  it('a new client gets at most the in-memory log\'s bytes of big events; Last-Event-ID resumes on the other instance', async () => {
    const a = await instance();
    const b = await instance();
    const big = 'x'.repeat(60 * 1024);
    for (let i = 1; i <= 40; i++) a.events.publish('big', 'tool_output', { turnId: 't2', callId: `c${i}`, output: big, last: i === 40 });
    await settled(a.events, 'big');
    const first = await EventStream.open(new URL('big', a.url));
    try {
      await first.next('tool_output', (e) => e.data.last === true);
      const bytes = first.events.reduce((sum, e) => sum + JSON.stringify(e.data).length, 0);
      expect(bytes).toBeLessThanOrEqual(MAX_LOG_BYTES);
      expect(first.events.length).toBeGreaterThan(10);
      expect(first.events.at(-1)!.data.callId).toBe('c40');
    } finally {
      first.close();
    }
    // From an id in the middle, on B: exactly the events after it.
    const all = await redis.xRange(a.events.key('big'), '-', '+');
    const resumed = await EventStream.open(new URL('big', b.url), all[29].id);
    try {
      await resumed.next('tool_output', (e) => e.data.last === true);
      expect(resumed.events.map((e) => e.rawId)).toEqual(all.slice(30).map((e) => e.id));
    } finally {
      resumed.close();
    }
  });
});

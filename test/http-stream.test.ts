/**
 * `eventStream` served for real (Hono's `app.fetch` behind Node http through `toRequest`/
 * `sendResponse`), read by `fetch`: two instances (two runners, two servers) sharing one PgLedger
 * schema; a stream cut mid-turn on A and resumed on B with `Last-Event-ID` loses and repeats
 * nothing, and A's live entries reach B's stream; 1,000 open streams on one runner raise no
 * warning and leave nothing behind.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { Hono } from 'hono';
import { TurnRegistry, TurnRunner, type Turn } from '../dist/src/index.js';
import { PgLedger } from '../dist/src/ledger/postgres/index.js';
import { eventStream, streamStats } from '../dist/src/http/index.js';
import { pgScene } from './support/pg.js';
import { serve, SseReader, type Served } from './support/http.js';
import { eventually } from './support/leaks.js';

const pg = pgScene('http');
const servers: Served[] = [];
afterEach(async () => { await Promise.all(servers.splice(0).map((s) => s.close())); });

const EVENTS = ['turn_started', 'tool_call', 'tool_progress', 'tool_output', 'say', 'question', 'turn_completed', 'turn_failed', 'turn_aborted'] as const;
/** This process's active resources by kind (sockets, servers, timers). */
function handles(): Record<string, number> {
  const count: Record<string, number> = { TCPSocketWrap: 0, TCPServerWrap: 0, Timeout: 0 };
  for (const kind of process.getActiveResourcesInfo()) count[kind] = (count[kind] ?? 0) + 1;
  return count;
}
const listeners = (runner: TurnRunner) => EVENTS.reduce((n, e) => n + runner.listenerCount(e), 0);

/** A turn body that says what it is told, when it is told, and returns on `finish`. */
function scripted() {
  const queue: { texts: string[]; done: boolean; ack: () => void }[] = [];
  let wake: (() => void) | undefined;
  const push = (texts: string[], done: boolean) => new Promise<void>((ack) => { queue.push({ texts, done, ack }); wake?.(); });
  return {
    say: (...texts: string[]) => push(texts, false),
    finish: () => push([], true),
    body: async (turn: Turn) => {
      for (;;) {
        while (queue.length === 0) await new Promise<void>((r) => { wake = r; });
        const command = queue.shift()!;
        for (const text of command.texts) await turn.say(text);
        command.ack();
        if (command.done) return 'done';
      }
    },
  };
}

/** A server whose `GET /sessions/:id/events` is `eventStream(runner, …)`, as an app would write it in Hono. */
async function instance(runner: TurnRunner): Promise<Served> {
  const app = new Hono();
  app.get('/sessions/:id/events', (c) => eventStream(runner, c.req.raw, { sessionId: c.req.param('id') }));
  const served = await serve(app.fetch);
  servers.push(served);
  return served;
}

describe('a session stream two instances share through PgLedger', () => {
  it('cut mid-turn on A and resumed on B with Last-Event-ID: no entry lost or repeated, and A\'s live entries reach B', async () => {
    const schema = pg.schema();
    const registry = new TurnRegistry();
    const ledgerA = await PgLedger.open({ pool: pg.pool(), schema, instanceId: 'A' });
    const ledgerB = await PgLedger.open({ pool: pg.pool(), schema, instanceId: 'B' });
    const runnerA = new TurnRunner({ registry, ledger: ledgerA });
    const runnerB = new TurnRunner({ registry, ledger: ledgerB });
    const [a, b] = [await instance(runnerA), await instance(runnerB)];

    const turn = scripted();
    const outcome = runnerA.run('s1', turn.body, { turnId: 't1', input: 'hello' });
    const cutA = new AbortController();
    const onA = new SseReader(await fetch(`${a.url}/sessions/s1/events`, { signal: cutA.signal }));
    await turn.say('a1', 'a2', 'a3');
    await onA.until((e) => e.filter((x) => x.event === 'say').length === 3, 10_000, 'three says on A');
    cutA.abort(); // the client goes away mid-turn
    await eventually(() => streamStats(runnerA).streams === 0, 5000, 'A to release the cut stream');

    await turn.say('b1', 'b2'); // written while no client follows
    const lastId = onA.events.at(-1)!.id!;
    const onB = new SseReader(await fetch(`${b.url}/sessions/s1/events`, { headers: { 'last-event-id': lastId } }));
    await onB.until((e) => e.filter((x) => x.event === 'say').length === 2, 10_000, 'the two missed says on B');
    await turn.say('c1'); // live on A, committed to the shared store: B polls it
    await onB.until((e) => e.some((x) => x.data?.text === 'c1'), 5000, 'A\'s live say on B');
    await turn.finish();
    expect((await outcome).status).toBe('completed');
    await onB.until((e) => e.some((x) => x.event === 'status' && x.data.status === 'completed'), 5000, 'the end of the turn on B');

    const seen = [...onA.events, ...onB.events];
    const history = await ledgerB.entries({ sessionId: 's1' });
    expect(seen.map((e) => Number(e.id))).toEqual(history.map((e) => e.seq)); // each once, in order
    expect(seen.map((e) => e.event)).toEqual(history.map((e) => e.type));
    expect(seen.map((e) => e.data)).toEqual(history);
    expect(onB.events[0].data.text).toBe('b1');

    servers.splice(0).forEach((s) => void s.close());
    await eventually(() => streamStats(runnerB).streams === 0, 5000, 'B to release its stream');
    expect(streamStats(runnerA)).toMatchObject({ streams: 0, feeds: 0, dropped: 0, timers: 0 });
    expect(streamStats(runnerB)).toMatchObject({ streams: 0, feeds: 0, dropped: 0, timers: 0 });
    expect(listeners(runnerA) + listeners(runnerB)).toBe(0);
    await ledgerA.close();
    await ledgerB.close();
    expect(registry.stats()).toEqual({ liveTokens: 0, liveSlots: 0, liveBridges: 0, liveOwners: 0 });
  });

  it('progress is live only (no id) and a Last-Event-ID that is no seq is a 400', async () => {
    const schema = pg.schema();
    const registry = new TurnRegistry();
    const ledger = await PgLedger.open({ pool: pg.pool(), schema, instanceId: 'A' });
    const runner = new TurnRunner({ registry, ledger });
    const a = await instance(runner);
    const bad = await fetch(`${a.url}/sessions/s2/events`, { headers: { 'last-event-id': 'abc' } });
    expect(bad.status).toBe(400);
    expect((await bad.json()).error).toMatch(/^Last-Event-ID: /);
    const reader = new SseReader(await fetch(`${a.url}/sessions/s2/events`));
    await eventually(() => streamStats(runner).feeds === 1, 5000, 'the stream to open');
    let release!: () => void;
    const released = new Promise<void>((r) => { release = r; });
    const outcome = runner.run('s2', (turn) => turn.tool('sh', {}, async (_token, call) => {
      call.progress({ stream: 'stdout', text: 'working' });
      await released;
      return 'ok';
    }), { turnId: 't2' });
    await reader.until((e) => e.some((x) => x.event === 'tool_progress'), 5000, 'the progress');
    release();
    await outcome;
    await reader.until((e) => e.some((x) => x.event === 'status' && x.data.status === 'completed'), 5000, 'the end');
    const progress = reader.events.find((x) => x.event === 'tool_progress')!;
    expect(progress.id).toBeUndefined();
    expect(progress.data).toMatchObject({ sessionId: 's2', turnId: 't2', name: 'sh', data: { stream: 'stdout', text: 'working' } });
    expect(reader.events.filter((x) => x.id !== undefined).map((x) => x.event)).toEqual(['turn_started', 'tool_call', 'tool_output', 'status']);
    await a.close();
    await eventually(() => streamStats(runner).streams === 0, 5000, 'the stream to be released');
    expect(listeners(runner)).toBe(0);
    await ledger.close();
  });
});

describe('many streams on one runner', () => {
  it('1,000 open streams raise no warning, all get a new entry, and all are released after', async () => {
    const warnings: Error[] = [];
    const onWarning = (w: Error) => warnings.push(w);
    process.on('warning', onWarning);
    try {
      const schema = pg.schema();
      const registry = new TurnRegistry();
      // Idle clients leave the pool at once: the count of sockets below is the streams', not the pool's.
      const ledger = await PgLedger.open({ pool: pg.pool(undefined, { idleTimeoutMillis: 50 }), schema, instanceId: 'A' });
      const runner = new TurnRunner({ registry, ledger });
      const before = handles();
      const a = await instance(runner);
      const cuts: AbortController[] = [];
      const readers: SseReader[] = [];
      // Opened 50 at a time (one at a time spent most of this spec's time waiting on each answer).
      for (let i = 0; i < 1000; i += 50) {
        const opened = Array.from({ length: 50 }, (_, j) => {
          const cut = new AbortController();
          cuts[i + j] = cut;
          return fetch(`${a.url}/sessions/s${(i + j) % 10}/events`, { signal: cut.signal });
        });
        for (const [j, response] of (await Promise.all(opened)).entries()) readers[i + j] = new SseReader(response);
      }
      await eventually(() => streamStats(runner).streams === 1000, 10_000, '1,000 streams');
      expect(streamStats(runner).feeds).toBe(10);
      expect(listeners(runner)).toBe(7 + 2); // one per event the hub follows, whatever the streams
      expect((await runner.run('s3', async (turn) => { await turn.say('to a hundred'); })).status).toBe('completed');
      const of3 = readers.filter((_, i) => i % 10 === 3);
      await Promise.all(of3.map((r) => r.until((e) => e.some((x) => x.data?.text === 'to a hundred'), 20_000, 'the say')));
      expect(readers.filter((_, i) => i % 10 !== 3).every((r) => r.events.length === 0)).toBe(true);
      for (const cut of cuts) cut.abort();
      await eventually(() => streamStats(runner).streams === 0, 20_000, 'every stream released');
      expect(streamStats(runner)).toMatchObject({ streams: 0, feeds: 0, dropped: 0, timers: 0 });
      expect(listeners(runner)).toBe(0);
      await a.close();
      servers.splice(0);
      // No socket, server or timer of the streams is left (the pool's idle clients were there before).
      const back = () => ['TCPSocketWrap', 'TCPServerWrap', 'ConnectWrap', 'Timeout'].every((k) => (handles()[k] ?? 0) <= (before[k] ?? 0));
      const deadline = Date.now() + 30_000;
      while (!back() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      expect(back(), `handles ${JSON.stringify(handles())}, before the server ${JSON.stringify(before)}`).toBe(true);
      await ledger.close();
      expect(registry.stats()).toEqual({ liveTokens: 0, liveSlots: 0, liveBridges: 0, liveOwners: 0 });
    } finally {
      process.off('warning', onWarning);
    }
    expect(warnings.map((w) => `${w.name}: ${w.message}`)).toEqual([]);
  }, 120_000);
});

// fullstop/http on this runtime's own server: `Bun.serve` on Bun, `Deno.serve` on Deno, Node's
// http through `toRequest`/`sendResponse` on Node; `fetch` as the client. A session's stream gets
// its history and then live entries, and is released when the client goes away; a turn tied to
// its request (`turnOptions`) is stopped with cancel.disconnect when the client goes away; a Stop
// is answered 200 `stopped` with the report.
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Ledger, TurnRegistry, TurnRunner } from '../../dist/src/index.js';
import { eventStream, sendResponse, stopResponse, streamStats, toRequest, turnOptions } from '../../dist/src/http/index.js';
import { assert, check, done, eventually, LIVENESS_MS } from './harness.mjs';

const registry = new TurnRegistry();
const dir = mkdtempSync(join(tmpdir(), 'fullstop-runtime-http-'));
const ledger = await Ledger.open(join(dir, 'history.jsonl'));
const runner = new TurnRunner({ registry, ledger, graceMs: 50 });
const outcomes = new Map();

/** Until stopped: says `working`, then waits for the turn's signal. */
async function untilStopped(turn) {
  await turn.say('working');
  await new Promise((r) => turn.signal.addEventListener('abort', r, { once: true }));
}

/** /events/:s (the stream), /turns/:s (a turn tied to the request, answered with the stream), /stop/:s. */
function handle(request) {
  const [, action, sessionId] = new URL(request.url).pathname.split('/');
  if (action === 'events') return eventStream(runner, request, { sessionId });
  if (action === 'stop') return stopResponse(runner, request, { sessionId });
  outcomes.set(sessionId, runner.run(sessionId, untilStopped, { turnId: `t-${sessionId}`, ...turnOptions(request) }));
  return eventStream(runner, request, { sessionId });
}

/** The runtime's own server on an ephemeral port: its URL and how to close it. */
async function listen() {
  if (globalThis.Bun !== undefined) {
    const server = Bun.serve({ port: 0, hostname: '127.0.0.1', idleTimeout: 0, fetch: handle });
    return { url: `http://127.0.0.1:${server.port}`, close: () => server.stop(true) };
  }
  if (globalThis.Deno !== undefined) {
    const server = Deno.serve({ port: 0, hostname: '127.0.0.1', onListen() {} }, handle);
    return { url: `http://127.0.0.1:${server.addr.port}`, close: () => server.shutdown() };
  }
  const server = createServer((req, res) => { void (async () => sendResponse(res, await handle(toRequest(req, res))))(); });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${server.address().port}`, close: () => { server.closeAllConnections(); server.close(); } };
}

/** Reads SSE frames from `response` into `events` (each `{ id, event, data }`) until the stream ends. */
function follow(response) {
  const events = [];
  const decoder = new TextDecoder();
  let buffer = '';
  void (async () => {
    try {
      for await (const chunk of response.body) {
        buffer += decoder.decode(chunk, { stream: true });
        let cut;
        while ((cut = buffer.indexOf('\n\n')) !== -1) {
          const frame = Object.fromEntries(buffer.slice(0, cut).split('\n').filter((l) => !l.startsWith(':')).map((l) => [l.slice(0, l.indexOf(': ')), l.slice(l.indexOf(': ') + 2)]));
          buffer = buffer.slice(cut + 2);
          if (frame.event !== undefined) events.push({ id: frame.id, event: frame.event, data: JSON.parse(frame.data) });
        }
      }
    } catch {
      // the client aborted it
    }
  })();
  return events;
}

const EVENTS = ['turn_started', 'tool_call', 'tool_progress', 'tool_output', 'say', 'question', 'turn_completed', 'turn_failed', 'turn_aborted'];
const listeners = () => EVENTS.reduce((n, e) => n + runner.listenerCount(e), 0);
const server = await listen();


check('http: a stream sends the history after Last-Event-ID, then live entries; the client\'s going away releases it', async () => {
  await runner.run('s1', async (turn) => { await turn.say('one'); });
  const cut = new AbortController();
  const events = follow(await fetch(`${server.url}/events/s1`, { headers: { 'last-event-id': '1' }, signal: cut.signal }));
  await eventually(() => events.some((e) => e.event === 'status'), LIVENESS_MS, 'the history');
  assert.deepEqual(events.map((e) => e.event), ['say', 'status']);
  await runner.run('s1', async (turn) => { await turn.say('two'); });
  await eventually(() => events.filter((e) => e.event === 'status').length === 2, LIVENESS_MS, 'the live entries');
  assert.deepEqual(events.map((e) => Number(e.id)), [2, 3, 4, 5, 6]);
  cut.abort();
  await eventually(() => streamStats(runner).streams === 0, LIVENESS_MS, 'the stream released');
  assert.equal(listeners(), 0);
});

check('http: a turn tied to its request is stopped with cancel.disconnect when the client goes away', async () => {
  const cut = new AbortController();
  const events = follow(await fetch(`${server.url}/turns/s2`, { method: 'POST', signal: cut.signal }));
  await eventually(() => events.some((e) => e.event === 'say'), LIVENESS_MS, 'the turn to run');
  cut.abort();
  const outcome = await outcomes.get('s2');
  assert.equal(outcome.status, 'cancelled');
  assert.equal(outcome.report.reason, 'cancel.disconnect');
  await eventually(() => streamStats(runner).streams === 0, LIVENESS_MS, 'the stream released');
});

check('http: a Stop is answered 200 stopped with the report', async () => {
  let started;
  const running = new Promise((r) => { started = r; });
  const outcome = runner.run('s3', async (turn) => { started(); await untilStopped(turn); });
  await running;
  const response = await fetch(`${server.url}/stop/s3`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
  assert.equal(response.status, 200);
  const body = await response.json();
  assert.equal(body.outcome, 'stopped');
  assert.equal(body.report.reason, 'cancel.user');
  assert.equal((await outcome).status, 'cancelled');
  assert.deepEqual(registry.stats(), { liveTokens: 0, liveSlots: 0, liveBridges: 0, liveOwners: 0 });
});

await done('http');
await server.close();
await ledger.close();
rmSync(dir, { recursive: true, force: true });

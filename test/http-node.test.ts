/**
 * Node's http through `toRequest`/`sendResponse`, with real sockets: a request's abort stops the
 * turn it runs with `cancel.disconnect` (`turnOptions`), or leaves it running (`detach`); a client
 * that does not read its stream is dropped past `maxBufferedBytes` and nothing of it is left.
 */
import { describe, expect, it } from 'vitest';
import { connect } from 'node:net';
import { TurnRegistry, TurnRunner, type Turn, type TurnOutcome } from '../dist/src/index.js';
import { eventStream, streamStats, turnOptions } from '../dist/src/http/index.js';
import { openLedger, useLedgerScratch } from './support/ledger-scratch.js';
import { serve, SseReader } from './support/http.js';
import { eventually } from './support/leaks.js';

useLedgerScratch('fullstop-http-node-');

/** A body that runs until its turn is stopped. */
async function untilStopped(turn: Turn): Promise<string> {
  await turn.say('working');
  await new Promise((r) => turn.signal.addEventListener('abort', r, { once: true }));
  return 'stopped';
}

/**
 * `POST /sessions/:id/turns`: runs a turn for the request and answers with the session's stream,
 * so the response lives as long as the turn (what `turnOptions` is for).
 */
async function turnServer(runner: TurnRunner, onDisconnect: 'stop' | 'detach') {
  const outcomes: Promise<TurnOutcome<string>>[] = [];
  const served = await serve((request) => {
    const sessionId = new URL(request.url).pathname.split('/')[2];
    outcomes.push(runner.run(sessionId, untilStopped, { turnId: `t-${sessionId}`, ...turnOptions(request, { onDisconnect }) }));
    return eventStream(runner, request, { sessionId });
  });
  return { ...served, outcomes };
}

describe('a request\'s turn', () => {
  it('stops with cancel.disconnect when its client goes away; the framework\'s words are not the reason', async () => {
    const registry = new TurnRegistry();
    const ledger = await openLedger();
    const runner = new TurnRunner({ registry, ledger, graceMs: 50 });
    const server = await turnServer(runner, 'stop');
    const cut = new AbortController();
    const reader = new SseReader(await fetch(`${server.url}/sessions/s1/turns`, { method: 'POST', signal: cut.signal }));
    await reader.until((e) => e.some((x) => x.event === 'say'), 10_000, 'the turn to run');
    cut.abort();
    const outcome = await server.outcomes[0];
    expect(outcome.status).toBe('cancelled');
    expect(outcome.status === 'cancelled' && outcome.report.reason).toBe('cancel.disconnect');
    // The adapter's own words are the detail, never the reason.
    expect(outcome.status === 'cancelled' && outcome.report.detail).toMatch(/client closed the connection/);
    const history = await ledger.entries({ sessionId: 's1' });
    expect(history.find((e) => e.type === 'status' && e.status === 'cancelled')).toMatchObject({ reason: 'cancel.disconnect' });
    expect(history.find((e) => e.type === 'turn_aborted')).toMatchObject({ reason: 'cancel.disconnect' });
    await eventually(() => streamStats(runner).streams === 0, 5000, 'the stream released');
    await server.close();
    expect(registry.stats()).toEqual({ liveTokens: 0, liveSlots: 0, liveBridges: 0, liveOwners: 0 });
  });

  it('runs on when detached: the client\'s going away ends only its stream', async () => {
    const registry = new TurnRegistry();
    const ledger = await openLedger();
    const runner = new TurnRunner({ registry, ledger, graceMs: 50 });
    const server = await turnServer(runner, 'detach');
    const cut = new AbortController();
    const reader = new SseReader(await fetch(`${server.url}/sessions/s1/turns`, { method: 'POST', signal: cut.signal }));
    await reader.until((e) => e.some((x) => x.event === 'say'), 10_000, 'the turn to run');
    cut.abort();
    await eventually(() => streamStats(runner).streams === 0, 5000, 'the stream released');
    // Proof it runs on: a stop now finds it running (it would be not_found had the abort stopped it).
    const answer = runner.requestStop('s1');
    expect(answer.outcome).toBe('stopping');
    expect((await server.outcomes[0]).status).toBe('cancelled');
    await server.close();
    expect(registry.stats()).toEqual({ liveTokens: 0, liveSlots: 0, liveBridges: 0, liveOwners: 0 });
  });
});

describe('a client that does not read', () => {
  it('is dropped once more than maxBufferedBytes wait for it; its connection is closed and nothing is left', async () => {
    const registry = new TurnRegistry();
    const ledger = await openLedger();
    const runner = new TurnRunner({ registry, ledger });
    const server = await serve((request) => eventStream(runner, request, { sessionId: 's1', maxBufferedBytes: 256 * 1024 }));
    const { port } = new URL(server.url);
    const socket = connect(Number(port), '127.0.0.1');
    await new Promise<void>((r) => socket.once('connect', r));
    socket.write(`GET /events HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\n\r\n`);
    socket.pause(); // never reads: the kernel's buffers fill, then the stream's own queue
    const closed = new Promise<void>((r) => socket.once('close', () => r()));
    await eventually(() => streamStats(runner).streams === 1, 5000, 'the stream to open');
    const chunk = 'x'.repeat(64 * 1024);
    const outcome = await runner.run('s1', async (turn) => {
      for (let i = 0; i < 1000 && streamStats(runner).dropped === 0; i++) await turn.say(chunk);
    });
    expect(outcome.status).toBe('completed');
    expect(streamStats(runner)).toMatchObject({ streams: 0, feeds: 0, dropped: 1, timers: 0 });
    socket.resume();
    await closed; // the server closed it
    await server.close();
    expect(registry.stats()).toEqual({ liveTokens: 0, liveSlots: 0, liveBridges: 0, liveOwners: 0 });
  }, 60_000);
});

describe('toRequest', () => {
  /** Sends `head` as a raw request and resolves with the raw answer. */
  async function raw(url: string, head: string): Promise<string> {
    const socket = connect(Number(new URL(url).port), '127.0.0.1');
    let answer = '';
    socket.on('data', (chunk) => { answer += chunk; });
    socket.write(head);
    await new Promise<void>((r) => socket.once('close', () => r()));
    return answer;
  }

  it('gives a URL whatever Host the client sends, and keeps a path that looks like another host a path', async () => {
    const server = await serve((request) => new Response(JSON.stringify({ url: request.url, host: request.headers.get('host') })));
    const badHost = await raw(server.url, 'GET /a?b=1 HTTP/1.0\r\nhost: [bad\r\nconnection: close\r\n\r\n');
    expect(badHost).toMatch(/^HTTP\/1.1 200/); // HTTP/1.0 asked: the body is not chunked
    expect(JSON.parse(badHost.slice(badHost.indexOf('\r\n\r\n') + 4))).toEqual({ url: 'http://localhost/a?b=1', host: '[bad' });
    const port = new URL(server.url).port;
    const twoSlashes = await raw(server.url, `GET //other.example/x HTTP/1.0\r\nhost: 127.0.0.1:${port}\r\nconnection: close\r\n\r\n`);
    expect(JSON.parse(twoSlashes.slice(twoSlashes.indexOf('\r\n\r\n') + 4)).url).toBe(`http://127.0.0.1:${port}//other.example/x`);
    await server.close();
  });
});

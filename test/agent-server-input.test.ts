/**
 * The agent server refuses bad input with a clear 4xx naming the field, keeps serving, and shuts
 * down cleanly on SIGTERM: running turns stopped, ledger flushed, children gone, exit code 0.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { eventually, isGone, liveDescendants } from './support/leaks.js';
import { ServerProcess, toolTree } from './e2e/server-process.js';

describe('agent server: bad input', () => {
  let server: ServerProcess;
  beforeAll(async () => { server = await ServerProcess.start(); });
  afterAll(async () => { expect((await server.terminate()).code).toBe(0); });

  const cases: [string, () => Promise<{ status: number; body: any }>, number, RegExp][] = [
    ['bad JSON', () => server.post('/api/sessions/s-in/turns', '{"prompt": '), 400, /^request body: invalid JSON/],
    ['a JSON array', () => server.post('/api/sessions/s-in/turns', '[1]'), 400, /^request body: expected a JSON object/],
    ['no prompt', () => server.post('/api/sessions/s-in/turns', {}), 400, /^prompt: expected a string, got nothing/],
    ['a number as prompt', () => server.post('/api/sessions/s-in/turns', { prompt: 42 }), 400, /^prompt: expected a string, got 42/],
    ['a blank prompt', () => server.post('/api/sessions/s-in/turns', { prompt: '  ' }), 400, /^prompt: expected a non-empty string/],
    ['a prompt over the limit', () => server.post('/api/sessions/s-in/turns', { prompt: 'x'.repeat(4001) }), 413, /^prompt: over 4000 characters \(got 4001\)/],
    ['a huge body', () => server.post('/api/sessions/s-in/turns', { prompt: 'x'.repeat(200_000) }), 413, /^request body: over 65536 bytes/],
    ['a bad session id', () => server.post('/api/sessions/a%20b/turns', { prompt: 'hi' }), 400, /^sessionId: expected 1-100 letters/],
    ['a bad stop reason', () => server.post('/api/sessions/s-in/stop', { reason: 7 }), 400, /^reason: expected a string, got 7/],
    ['history of an unknown session', () => server.get('/api/sessions/never-seen/history'), 404, /^sessionId: no session "never-seen"/],
    ['an answer that is not a string', () => server.post('/api/questions/q-1/answer', { answer: {} }), 400, /^answer: expected a string/],
    ['an unknown route', () => server.get('/api/nothing'), 404, /^path: no route for GET \/api\/nothing/],
    ['a wrong method', () => server.get('/api/sessions/s-in/turns'), 405, /^method: \/api\/sessions\/s-in\/turns takes POST, not GET/],
  ];
  for (const [what, send, status, error] of cases) {
    it(`refuses ${what} with ${status} and a message naming the field`, async () => {
      const res = await send();
      expect(res.status).toBe(status);
      expect(res.body.error).toMatch(error);
    });
  }

  it('answers a stop for a session it does not know 200 not_found (fullstop/http\'s stopResponse)', async () => {
    expect(await server.post('/api/sessions/never-seen/stop', {})).toEqual({ status: 200, body: { outcome: 'not_found', sessionId: 'never-seen' } });
  });

  it('refuses a bad Last-Event-ID', async () => {
    const res = await fetch(new URL('/api/sessions/s-in/events', server.url), { headers: { 'last-event-id': 'abc' } });
    expect(res.status).toBe(400);
    expect((await res.json()).error).toMatch(/^Last-Event-ID: expected an entry's seq/);
  });

  it('refuses a body announced over the limit before reading it', async () => {
    const status = await new Promise<number>((resolve, reject) => {
      const req = request(new URL('/api/sessions/s-in/turns', server.url), { method: 'POST', headers: { 'content-type': 'application/json', 'content-length': String(10 * 1024 * 1024) } }, (res) => {
        res.resume();
        resolve(res.statusCode!);
      });
      req.on('error', reject);
      req.write('{"prompt":"');
      // The rest never comes: the answer must not wait for it.
    });
    expect(status).toBe(413);
  });

  it('answers 409 to a second turn while one runs, and an unknown question with accepted: false', async () => {
    const events = await server.events('s-busy');
    try {
      const first = await server.post('/api/sessions/s-busy/turns', { prompt: 'ask' });
      expect(first.status).toBe(202);
      const second = await server.post('/api/sessions/s-busy/turns', { prompt: 'hi' });
      expect(second.status).toBe(409);
      expect(second.body.error).toMatch(/^sessionId: session "s-busy" already has a running turn \(turn-/);
      expect(await server.post('/api/questions/q-unknown/answer', { answer: 'yes' })).toEqual({ status: 200, body: { accepted: false, outcome: 'not_found', questionId: 'q-unknown' } });
      await events.next('question');
      expect((await server.post('/api/sessions/s-busy/stop', {})).body.outcome).toBe('stopped');
      await events.next('turn_aborted');
    } finally {
      events.close();
    }
  });

  it('still serves after all of that', async () => {
    const { status, body } = await server.get('/healthz');
    expect(status).toBe(200);
    expect(body).toMatchObject({ ok: true, stats: { registry: { liveTokens: 0, liveSlots: 0, liveBridges: 0, liveOwners: 0 }, runningTurns: 0 } });
  });
});

describe('agent server: shutdown', () => {
  it('on SIGTERM stops the running turn, flushes its history, leaves no child and exits 0', async () => {
    const data = mkdtempSync(join(tmpdir(), 'fullstop-server-test-'));
    try {
      const server = await ServerProcess.start(['--data', data]);
      const events = await server.events('s-term');
      const { body } = await server.post('/api/sessions/s-term/turns', { prompt: 'shell' });
      await events.next('tool_call');
      await eventually(() => toolTree(server.pid).length === 3, 10_000, 'sh and two sleeps');
      const tree = toolTree(server.pid);
      const exit = await server.terminate();
      events.close();
      expect(exit, server.output).toEqual({ code: 0, signal: null });
      expect(server.output).toMatch(/stopped cleanly; registry \{"liveTokens":0,"liveSlots":0,"liveBridges":0,"liveOwners":0\}/);
      for (const pid of tree) expect(isGone(pid), `pid ${pid}`).toBe(true);
      const entries = readFileSync(join(data, 'history.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l))
        .filter((e) => e.turnId === body.turnId);
      expect(entries.filter((e) => e.type === 'status')).toMatchObject([
        { status: 'cancelling', reason: 'cancel.shutdown' }, { status: 'cancelled', reason: 'cancel.shutdown' },
      ]);
      expect(entries.some((e) => e.type === 'tool_aborted'), JSON.stringify(entries)).toBe(true);
      expect(entries.some((e) => e.type === 'turn_aborted')).toBe(true);
    } finally {
      rmSync(data, { recursive: true, force: true });
    }
  });

  it('refuses a bad flag with exit code 2 and a one-line reason', async () => {
    await expect(ServerProcess.start(['--port', 'x'])).rejects.toThrow(/exited \(2\)[\s\S]*--port: expected 0-65535, got x/);
  });
});

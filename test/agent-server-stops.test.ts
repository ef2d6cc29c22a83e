/**
 * Stops kept for turns that have not started, through the example server (with a token), as a
 * hostile client would send them: one client's flood of stops for made-up turn ids of other
 * sessions must not erase another user's pending Stop, and the answer says when a stop could
 * not be kept.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Agent, request } from 'node:http';
import { liveDescendants } from './support/leaks.js';
import { ServerProcess } from './e2e/server-process.js';

const TOKEN = 'stops-test-token-0123456789';
let server: ServerProcess;

beforeAll(async () => { server = await ServerProcess.start(['--token', TOKEN]); });
afterAll(async () => {
  const { code } = await server.terminate();
  expect(code, server.output).toBe(0);
  expect(liveDescendants()).toEqual([]);
});

/** POSTs a JSON body from the local address `from` (each 127.x address is a client of its own). */
function postFrom(agent: Agent, path: string, body: unknown): Promise<{ status: number; body: any }> {
  const url = new URL(path, server.url);
  const text = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request({ agent, host: url.hostname, port: url.port, path: url.pathname, method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) } }, (res) => {
      let data = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => { data += chunk; });
      res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(data) }));
    });
    req.on('error', reject);
    req.end(text);
  });
}

describe('stops kept for turns that have not started', () => {
  it("one client's 10,001 stops for made-up turns of other sessions leave another user's pending Stop in force", async () => {
    const user = new Agent({ keepAlive: true, localAddress: '127.0.0.1' });
    const flooder = new Agent({ keepAlive: true, maxSockets: 16, localAddress: '127.0.0.2' });
    try {
      // The user pressed Stop before their Send reached the server: the stop is kept.
      const turnId = 'turn-user-kept-stop';
      expect(await postFrom(user, '/api/sessions/user-session/stop', { turnId })).toEqual({
        status: 202, body: { outcome: 'pending', sessionId: 'user-session', turnId, reason: 'cancel.user', graceMs: expect.any(Number), expiresAt: expect.any(Number) },
      });

      // Another client sends 10,001 stops for made-up turn ids, each for a session of its own:
      // more than the runner's whole book held before (10,000, the oldest dropped).
      const answers = new Map<string, number>();
      let next = 0;
      const FLOOD = 10_001;
      await Promise.all(Array.from({ length: 16 }, async () => {
        while (next < FLOOD) {
          const i = next++;
          const { status, body } = await postFrom(flooder, `/api/sessions/flood-${i}/stop`, { turnId: `turn-made-up-${i}` });
          const key = `${status} ${body.outcome}`;
          answers.set(key, (answers.get(key) ?? 0) + 1);
        }
      }));

      // The user's Send lands: the turn starts cancelled, running nothing.
      const sent = await postFrom(user, '/api/sessions/user-session/turns', { prompt: 'shell', turnId });
      expect(sent.status).toBe(202);
      const events = await server.events('user-session');
      try {
        const end = await events.next('turn_started', (e) => e.data.turnId === turnId, 10_000)
          .then(() => events.next('turn_aborted', (e) => e.data.turnId === turnId, 10_000));
        expect(end.data.reason).toBe('cancel.user');
        expect(events.types()).not.toContain('tool_call');
      } finally {
        events.close();
      }
      // Each made-up turn is its session's first kept stop: kept (a session's first always has room).
      expect(Object.fromEntries(answers)).toEqual({ '202 pending': FLOOD });
      // The user's own client still has room: its stops are its own.
      expect(await postFrom(user, '/api/sessions/user-session-2/stop', { turnId: 'turn-user-2' })).toMatchObject({ status: 202, body: { outcome: 'pending' } });
    } finally {
      user.destroy();
      flooder.destroy();
    }
  });

  it("100 clients (127.0.0.2-127.0.0.101), 100 stops each for made-up turns, leave room for a user's own Stop-before-Send: its turn is stopped", async () => {
    const clients = Array.from({ length: 100 }, (_, i) => new Agent({ keepAlive: true, maxSockets: 4, localAddress: `127.0.0.${i + 2}` }));
    const user = new Agent({ keepAlive: true, localAddress: '127.0.0.1' });
    try {
      // Each client stays within any per-client bound: 100 stops, each for a session of its own.
      const answers = new Map<string, number>();
      await Promise.all(clients.map(async (client, c) => {
        for (let i = 0; i < 100; i += 4) {
          await Promise.all([0, 1, 2, 3].map(async (j) => {
            const { status, body } = await postFrom(client, `/api/sessions/spoof-${c}-${i + j}/stop`, { turnId: `turn-spoof-${c}-${i + j}` });
            const key = `${status} ${body.outcome}`;
            answers.set(key, (answers.get(key) ?? 0) + 1);
          }));
        }
      }));
      expect(answers.get('202 pending')).toBe(10_000);

      // The user pressed Stop before their Send reached the server: the stop is kept.
      const turnId = 'turn-user-after-spoof';
      expect(await postFrom(user, '/api/sessions/user-after-spoof/stop', { turnId })).toEqual({
        status: 202, body: { outcome: 'pending', sessionId: 'user-after-spoof', turnId, reason: 'cancel.user', graceMs: expect.any(Number), expiresAt: expect.any(Number) },
      });
      // The Send lands: the turn starts cancelled, its shell tool never runs.
      expect((await postFrom(user, '/api/sessions/user-after-spoof/turns', { prompt: 'shell', turnId })).status).toBe(202);
      const events = await server.events('user-after-spoof');
      try {
        const end = await events.next('turn_aborted', (e) => e.data.turnId === turnId, 10_000);
        expect(end.data.reason).toBe('cancel.user');
        expect(events.types()).not.toContain('tool_call');
      } finally {
        events.close();
      }
    } finally {
      for (const client of clients) client.destroy();
      user.destroy();
    }
  });

  it("a session's book is bounded too: past 100 kept stops the answer is refused (session_full), and nothing kept is dropped", async () => {
    // Two clients, 60 stops each, for made-up turns of one session.
    const clients = ['127.0.0.3', '127.0.0.4'].map((localAddress) => new Agent({ keepAlive: true, localAddress }));
    try {
      const answers: { status: number; body: any }[] = [];
      for (let i = 0; i < 120; i++) answers.push(await postFrom(clients[i % 2], '/api/sessions/one-session/stop', { turnId: `turn-guess-${i}` }));
      expect(answers.slice(0, 100).every((a) => a.status === 202 && a.body.outcome === 'pending')).toBe(true);
      for (const answer of answers.slice(100)) {
        expect(answer.status).toBe(429);
        expect(answer.body).toMatchObject({ outcome: 'refused', sessionId: 'one-session', why: 'session_full', error: expect.stringMatching(/^stop: not kept \(session_full\)/) });
      }
      // The first kept stop is still in force: its turn starts cancelled.
      expect((await postFrom(clients[0], '/api/sessions/one-session/turns', { prompt: 'shell', turnId: 'turn-guess-0' })).status).toBe(202);
      const events = await server.events('one-session');
      try {
        await events.next('turn_aborted', (e) => e.data.turnId === 'turn-guess-0', 10_000);
        expect(events.types()).not.toContain('tool_call');
      } finally {
        events.close();
      }
      // Once the server has let the turn go (its stream shows the history's entries, which are
      // written before the turn's end is emitted), nothing runs in the session: a stop without a turn id says so.
      for (const deadline = Date.now() + 10_000; (await server.get('/healthz')).body.stats.runningTurns !== 0;) {
        if (Date.now() > deadline) throw new Error('timed out after 10000 ms waiting for the server to let the turn go');
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      expect(await postFrom(clients[1], '/api/sessions/one-session/stop', {})).toEqual({ status: 200, body: { outcome: 'not_found', sessionId: 'one-session' } });
    } finally {
      for (const client of clients) client.destroy();
    }
  });
});

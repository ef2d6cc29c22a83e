/**
 * The agent server under clients that misbehave, against a real server process: stream clients
 * that never read must not make it buffer without end (each is dropped once its backlog passes a
 * bound, and the event log is bounded in bytes), and idle streams must not hold session slots.
 * The clients are raw sockets in a child process (test/fixtures/agent-server/silent-streams.mjs)
 * with a raised open-file limit, so these tests do not depend on this process's limit.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ServerProcess, type EventStream } from './e2e/server-process.js';

const SILENT = fileURLToPath(new URL('./fixtures/agent-server/silent-streams.mjs', import.meta.url));
const FD_LIMIT = 4096;
const MB = 1024 * 1024;
/** Turn+stop cycles of the first spec. */
const CYCLES = 1000;

const cleanups: (() => Promise<unknown> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A server with its ledger on tmpfs (these tests are about memory, not fdatasync). */
async function startServer(args: string[] = []): Promise<ServerProcess> {
  const data = mkdtempSync(join(existsSync('/dev/shm') ? '/dev/shm' : tmpdir(), 'fullstop-load-'));
  const server = await ServerProcess.start(['--data', data, ...args], {}, FD_LIMIT);
  cleanups.push(async () => {
    expect((await server.terminate()).code, server.output).toBe(0);
    rmSync(data, { recursive: true, force: true });
  });
  return server;
}

/** Opens `count` streams that never read; resolves once every request is sent. */
async function silentStreams(server: ServerProcess, count: number, prefix: string): Promise<ChildProcess> {
  const port = new URL(server.url).port;
  const child = spawn('sh', ['-c', `ulimit -n ${FD_LIMIT} && exec "$0" "$@"`, process.execPath, SILENT, port, String(count), prefix], { stdio: ['pipe', 'pipe', 'inherit'] });
  cleanups.push(() => new Promise((resolve) => { child.once('exit', resolve); child.stdin!.end(); }));
  await new Promise<void>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (chunk: Buffer) => { out += chunk; if (out.includes(`open ${count}`)) resolve(); });
    child.once('exit', (code) => reject(new Error(`silent-streams exited (${code}) before opening ${count} streams`)));
  });
  return child;
}

/** The server's resident memory now and at its peak, from /proc (bytes). */
function memory(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)![1]) * 1024;
  return { rss: kb('VmRSS'), peak: kb('VmHWM') };
}

/** Polls /healthz until `ready(stats)` (a handshake with the server's own count; liveness bound only). */
async function healthUntil(server: ServerProcess, ready: (stats: any) => boolean, what: string, ms = 20_000): Promise<any> {
  for (const deadline = Date.now() + ms; ;) {
    const { stats } = (await server.get('/healthz')).body;
    if (ready(stats)) return stats;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}; stats ${JSON.stringify(stats)}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** One turn of `sessionId` with `prompt`, stopped at once. */
async function turnAndStop(server: ServerProcess, sessionId: string, prompt: string): Promise<void> {
  const started = await server.post(`/api/sessions/${sessionId}/turns`, { prompt });
  expect(started.status, JSON.stringify(started.body)).toBe(202);
  const stopped = await server.post(`/api/sessions/${sessionId}/stop`, {});
  expect(stopped.body.outcome, JSON.stringify(stopped.body)).toBe('stopped');
}

/**
 * One turn of `sessionId` with `prompt` whose Stop comes first (the page's early Stop): the turn
 * starts cancelled and its events (a turn_started with the prompt, a turn_aborted) go out, but
 * its body does not run. The body reads the session's history for the prompt, and a thousand
 * 24 KB inputs in one session would make that read, not the streams, the cost under test.
 */
async function stopThenTurn(server: ServerProcess, events: EventStream, sessionId: string, prompt: string, turnId: string): Promise<void> {
  const from = events.events.length;
  const stopped = await server.post(`/api/sessions/${sessionId}/stop`, { turnId });
  expect(stopped.body.outcome, JSON.stringify(stopped.body)).toBe('pending');
  const started = await server.post(`/api/sessions/${sessionId}/turns`, { prompt, turnId });
  expect(started.status, JSON.stringify(started.body)).toBe(202);
  await events.next('turn_aborted', (e) => e.data.turnId === turnId, 10_000, from);
}

describe('agent server: clients that never read', () => {
  // 1,000 cycles: 24 MB of turn_started entries in one session, twelve times a stream's 2 MiB bound.
  it(`10 streams that never read, through ${CYCLES} turn+stop cycles with 24 KB events (and 10 more replaying after): RSS grows < 200 MB`, async () => {
    const server = await startServer();
    // 4000 control characters: 24 KB of JSON in each turn_started event.
    const prompt = '\u0001'.repeat(4000);
    for (let i = 0; i < 20; i++) await turnAndStop(server, 'rss', prompt); // warm-up: code compiled, pool up
    const before = memory(server.pid);
    await silentStreams(server, 10, 'rss=');
    await healthUntil(server, (s) => s.sseClients === 10, '10 stream clients');
    const started = Date.now();
    // A client that reads, to know when each turn has ended.
    const watcher = await server.events('rss');
    try {
      for (let i = 0; i < CYCLES; i++) await stopThenTurn(server, watcher, 'rss', prompt, `turn-rss-${i}`);
    } finally {
      watcher.close();
    }
    const cycleMs = Date.now() - started;
    // Ten more that ask for the whole log at once, and never read it.
    await silentStreams(server, 10, 'rss=');
    const stats = await healthUntil(server, (s) => s.sseClients + (s.sseClientsDropped ?? 0) >= 20, '20 stream clients seen');
    const after = memory(server.pid);
    const grewMb = (after.rss - before.rss) / MB;
    console.log(`RSS ${(before.rss / MB).toFixed(0)} MB -> ${(after.rss / MB).toFixed(0)} MB (+${grewMb.toFixed(0)} MB, peak ${(after.peak / MB).toFixed(0)} MB) ` +
      `after ${CYCLES} cycles in ${cycleMs} ms; clients open ${stats.sseClients}, dropped ${stats.sseClientsDropped}`);
    expect(grewMb).toBeLessThan(200);
    // The server still serves, and a client that reads gets the newest events.
    const events = await server.events('rss');
    try {
      await turnAndStop(server, 'rss', 'after all that');
      const last = await events.next('turn_started', (e) => e.data.input === 'after all that');
      await events.next('turn_aborted', (e) => e.data.turnId === last.data.turnId);
    } finally {
      events.close();
    }
  }, 120_000);

  it('1,000 idle streams on made-up sessions leave a new session free to Send', async () => {
    const server = await startServer();
    await silentStreams(server, 1000, 'idle-');
    await healthUntil(server, (s) => s.sseClients === 1000, '1,000 stream clients');
    const events = await server.events('fresh-session');
    try {
      const { status, body } = await server.post('/api/sessions/fresh-session/turns', { prompt: 'hello' });
      expect(status, JSON.stringify(body)).toBe(202);
      await events.next('status', (e) => e.data.status === 'completed' && e.data.turnId === body.turnId);
    } finally {
      events.close();
    }
    // The closed stream above is gone once the server has seen its socket close.
    const stats = await healthUntil(server, (s) => s.sseClients === 1000, 'the closed stream to be gone');
    expect(stats.sessions).toBe(0); // a stream holds no session; the one turn is over
  }, 60_000);

  it('refuses a stream past --max-streams with 503 (and retry-after) until one closes', async () => {
    const server = await startServer(['--max-streams', '3']);
    const open = await Promise.all(['a', 'b', 'c'].map((s) => server.events(`cap-${s}`)));
    try {
      const refused = await fetch(new URL('/api/sessions/cap-d/events', server.url));
      expect(refused.status).toBe(503);
      expect(refused.headers.get('retry-after')).toBe('5');
      expect((await refused.json()).error).toBe('events: 3 event streams are open, the most this server keeps; try again later');
      open.shift()!.close();
      await healthUntil(server, (s) => s.sseClients === 2, 'a stream to close');
      open.push(await server.events('cap-d'));
      expect((await server.get('/healthz')).body.stats.sseClients).toBe(3);
    } finally {
      for (const stream of open) stream.close();
    }
  });
});

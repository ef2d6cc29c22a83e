/**
 * History reads do not slow a stop down: with a 100 MB ledger of 2,000 sessions, a Stop answers
 * promptly while 20 history reads are in flight (goal 500 ms; the figure is printed), and the
 * server's memory stays under 600 MB,
 * because a read of one session's history does not parse the others' entries
 * (`Ledger.entries({ sessionId })`).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync, statSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ServerProcess } from './e2e/server-process.js';

const MB = 1024 * 1024;
const SESSIONS = 2000;
const SAYS = 8;

/**
 * Writes a valid ledger of at least `bytes`: complete turns (turn_started, says, one tool call with
 * its output, status completed) spread round-robin over `SESSIONS` sessions. Returns how many
 * entries each session has.
 */
function writeLedger(path: string, bytes: number): Map<string, number> {
  const perSession = new Map<string, number>();
  const fd = openSync(path, 'w');
  const text = 'lorem ipsum dolor sit amet '.repeat(6);
  let seq = 0;
  let written = 0;
  const at = Date.now() - 86_400_000;
  try {
    for (let turn = 0; written < bytes; turn++) {
      const sessionId = `hist-${turn % SESSIONS}`;
      const turnId = `turn-gen-${turn}`;
      const base = (type: string) => `{"seq":${++seq},"at":${at + seq},"sessionId":"${sessionId}","turnId":"${turnId}","type":"${type}"`;
      let lines = `${base('turn_started')}}\n`;
      for (let i = 0; i < SAYS; i++) lines += `${base('say')},"text":"${text}${i}"}\n`;
      lines += `${base('tool_call')},"callId":"call-1","name":"crunch","args":{"phases":3}}\n`;
      lines += `${base('tool_output')},"callId":"call-1","output":{"digest":"${'ab'.repeat(32)}","phases":3,"hashes":90000},"success":true}\n`;
      lines += `${base('status')},"status":"completed"}\n`;
      written += writeSync(fd, lines);
      perSession.set(sessionId, (perSession.get(sessionId) ?? 0) + SAYS + 4);
    }
  } finally {
    closeSync(fd);
  }
  return perSession;
}

function rss(pid: number): number {
  return Number(/^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) * 1024;
}

let server: ServerProcess;
let perSession: Map<string, number>;
const data = mkdtempSync(join(existsSync('/dev/shm') ? '/dev/shm' : tmpdir(), 'fullstop-history-'));

beforeAll(async () => {
  const generated = Date.now();
  perSession = writeLedger(join(data, 'history.jsonl'), 100 * MB);
  const opened = Date.now();
  server = await ServerProcess.start(['--data', data]);
  console.log(`ledger ${(statSync(join(data, 'history.jsonl')).size / MB).toFixed(0)} MB written in ${opened - generated} ms; ` +
    `server up in ${Date.now() - opened} ms, RSS ${(rss(server.pid) / MB).toFixed(0)} MB`);
}, 60_000);
afterAll(async () => {
  if (server !== undefined) expect((await server.terminate()).code, server.output).toBe(0);
  rmSync(data, { recursive: true, force: true });
});

describe('agent server: history of a 100 MB ledger', () => {
  it('a stop answers promptly while 20 history reads are in flight; RSS stays under 600 MB', async () => {
    const events = await server.events('hist-live');
    try {
      // The same stop with nothing else going on, for the figure beside the one under reads.
      const quiet = (await server.post('/api/sessions/hist-live/turns', { prompt: 'hello there' })).body.turnId;
      await events.next('say', (e) => e.data.turnId === quiet);
      const quietSent = Date.now();
      expect((await server.post('/api/sessions/hist-live/stop', {})).body.outcome).toBe('stopped');
      const quietMs = Date.now() - quietSent;
      await events.next('turn_aborted', (e) => e.data.turnId === quiet);

      // A reply streaming (no worker hashing on the machine's two cores meanwhile): what the stop
      // waits for is the server, not CPU the turn itself takes.
      const { body } = await server.post('/api/sessions/hist-live/turns', { prompt: 'hello there' });
      await events.next('say', (e) => e.data.turnId === body.turnId);
      let peak = rss(server.pid);
      const sampler = setInterval(() => { peak = Math.max(peak, rss(server.pid)); }, 5);
      // Ten sessions of the file, ten the server never saw (each read must still find nothing quickly).
      const ids = Array.from({ length: 20 }, (_, i) => (i % 2 === 0 ? `hist-${i * 97}` : `hist-unknown-${i}`));
      const readsStarted = Date.now();
      const reads = ids.map((id) => server.get(`/api/sessions/${id}/history`).then((r) => ({ ...r, ms: Date.now() - readsStarted })));
      const stopSent = Date.now();
      const stop = await server.post('/api/sessions/hist-live/stop', {});
      const stopMs = Date.now() - stopSent;
      const answers = await Promise.all(reads);
      clearInterval(sampler);
      const readsMs = Math.max(...answers.map((a) => a.ms));
      console.log(`stop answered in ${stopMs} ms during 20 history reads (${quietMs} ms quiet) (all answered within ${readsMs} ms); server RSS peak ${(peak / MB).toFixed(0)} MB`);
      expect(stop.body).toMatchObject({ outcome: 'stopped', turnId: body.turnId });
      // The goal is 500 ms (met on a quiet machine with room to spare); the bound here is a
      // liveness bound with room for a machine busy with other suites.
      expect(stopMs).toBeLessThan(2000);
      expect(peak).toBeLessThan(600 * MB);
      answers.forEach((answer, i) => {
        if (ids[i].startsWith('hist-unknown')) {
          expect(answer.status).toBe(404);
        } else {
          expect(answer.status).toBe(200);
          expect(answer.body.entries.length).toBe(perSession.get(ids[i]));
          expect(answer.body.entries.every((e: any) => e.sessionId === ids[i])).toBe(true);
        }
      });
    } finally {
      events.close();
    }
  }, 60_000);
});

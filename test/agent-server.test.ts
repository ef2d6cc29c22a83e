/**
 * The agent server's API against a real server process: real TurnPool worker, real process tree,
 * real ledger. A turn completes; Stop during crunch, shell and ask; SSE replay after a reconnect.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import { eventually, isGone, liveDescendants } from './support/leaks.js';
import { ServerProcess, type EventStream, toolTree } from './e2e/server-process.js';

let server: ServerProcess;
const streams: EventStream[] = [];

beforeAll(async () => { server = await ServerProcess.start(); });
afterAll(async () => {
  const { code } = await server.terminate();
  expect(code, server.output).toBe(0);
  expect(liveDescendants()).toEqual([]);
});
afterEach(async () => {
  for (const s of streams.splice(0)) s.close();
  // Nothing of a finished turn is left: no token, slot, bridge or owner, no task, no child process.
  await eventually(() => liveDescendants(server.pid).length === 0, 5000, 'the server to have no child processes');
  const { body } = await server.get('/healthz');
  expect(body.stats.registry).toEqual({ liveTokens: 0, liveSlots: 0, liveBridges: 0, liveOwners: 0 });
  expect(body.stats.pool).toMatchObject({ running: 0, queued: 0 });
  expect(body.stats.runningTurns).toBe(0);
});

/** A fresh session and its event stream. */
async function session(): Promise<{ id: string; events: EventStream }> {
  const id = `t-${randomUUID().slice(0, 8)}`;
  const events = await server.events(id);
  streams.push(events);
  return { id, events };
}

async function startTurn(id: string, prompt: string): Promise<string> {
  const { status, body } = await server.post(`/api/sessions/${id}/turns`, { prompt });
  expect(status, JSON.stringify(body)).toBe(202);
  expect(body.turnId).toMatch(/^turn-/);
  return body.turnId;
}

/** Polls an async condition (liveness bound only). */
async function until(condition: () => Promise<boolean>, what: string, ms = 10_000): Promise<void> {
  for (const deadline = Date.now() + ms; !(await condition());) {
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
  }
}

/** The reply of `turnId` as its stream carried it: its `say` events' text. */
function said(events: EventStream, turnId: string): string {
  return events.events.filter((e) => e.type === 'say' && e.data.turnId === turnId).map((e) => e.data.text).join('');
}

async function history(id: string): Promise<any[]> {
  const { status, body } = await server.get(`/api/sessions/${id}/history`);
  expect(status).toBe(200);
  return body.entries;
}

/** The tail of a stopped turn's history: aborted output of the unfinished call, marker, cancelled. */
function expectStoppedHistory(entries: any[], turnId: string, tool: string): void {
  const turn = entries.filter((e) => e.turnId === turnId);
  const call = turn.find((e) => e.type === 'tool_call' && e.name === tool);
  expect(call).toBeDefined();
  expect(turn.find((e) => e.type === 'tool_aborted' && e.callId === call.callId)?.output).toMatch(/^aborted by user after \d+\.\ds$/);
  expect(turn.filter((e) => e.type === 'status').map((e) => e.status)).toEqual(['cancelling', 'cancelled']);
  expect(turn.some((e) => e.type === 'turn_aborted')).toBe(true);
}

describe('agent server: turns', () => {
  it('streams a reply a token at a time and completes; the ledger holds the turn', async () => {
    const { id, events } = await session();
    const turnId = await startTurn(id, 'hello there');
    await events.next('status', (e) => e.data.status === 'completed' && e.data.turnId === turnId);
    const says = events.events.filter((e) => e.type === 'say' && e.data.turnId === turnId);
    expect(says.length).toBeGreaterThan(10);
    expect(said(events, turnId)).toMatch(/^You said: "hello there"/);
    // The stream is the ledger's entries: the prompt is turn_started's input, the ids are seqs.
    expect(events.events[0]).toMatchObject({ type: 'turn_started', data: { turnId, input: 'hello there' } });
    const ids = events.events.map((e) => e.id);
    expect(ids).toEqual(ids.map((_, i) => ids[0] + i));
    const entries = (await history(id)).filter((e) => e.turnId === turnId);
    expect(entries[0].type).toBe('turn_started');
    expect(entries.at(-1)).toMatchObject({ type: 'status', status: 'completed' });
    expect(entries.filter((e) => e.type === 'say').map((e) => e.text).join('')).toBe(said(events, turnId));
  });

  it('runs a short crunch in the pool to completion; tool_call and tool_output share the call id', async () => {
    const { id, events } = await session();
    const turnId = await startTurn(id, 'crunch 3');
    await events.next('status', (e) => e.data.status === 'completed' && e.data.turnId === turnId, 60_000);
    const call = await events.next('tool_call');
    const output = await events.next('tool_output');
    expect(call.data).toMatchObject({ turnId, callId: 'scripted-1', name: 'crunch', args: { phases: 3 } });
    expect(output.data).toMatchObject({ turnId, callId: 'scripted-1', success: true, output: { phases: 3, hashes: 90_000 } });
    expect(output.data.output.digest).toMatch(/^[0-9a-f]{64}$/);
    expect(said(events, turnId)).toContain('Done. crunch returned');
    expect((await server.get('/healthz')).body.stats.pool.completed).toBeGreaterThanOrEqual(1);
  });

  it('asks a question; the answer goes back through the API once and the turn completes', async () => {
    const { id, events } = await session();
    const turnId = await startTurn(id, 'ask');
    const question = await events.next('question', (e) => e.data.turnId === turnId);
    expect(question.data.question).toBe('Shall I go on?');
    const path = `/api/questions/${question.data.questionId}/answer`;
    const { questionId } = question.data;
    expect(await server.post(path, { answer: 'yes, go on' })).toEqual({ status: 200, body: { accepted: true, outcome: 'accepted', questionId, node: 'local' } });
    // Taken once: while its turn runs another answer is already_answered; once it has ended, not_found.
    expect(await server.post(path, { answer: 'again' })).toEqual({ status: 200, body: { accepted: false, outcome: expect.stringMatching(/^(already_answered|not_found)$/), questionId } });
    await events.next('status', (e) => e.data.status === 'completed' && e.data.turnId === turnId);
    expect(said(events, turnId)).toContain('yes, go on');
    expect((await events.next('tool_output')).data).toMatchObject({ success: true, output: { answer: 'yes, go on' } });
  });
});

describe('agent server: Stop', () => {
  it('stops a crunch in its worker at the next checkpoint, within the grace, and records the aborted call', async () => {
    const { id, events } = await session();
    const turnId = await startTurn(id, 'crunch');
    await events.next('tool_call', (e) => e.data.name === 'crunch');
    // Handshake: the task is on a worker (not queued) before the stop.
    await until(async () => (await server.get('/healthz')).body.stats.pool.running === 1, 'the crunch task on a worker');
    const { status, body } = await server.post(`/api/sessions/${id}/stop`, {});
    expect(status).toBe(200);
    expect(body).toMatchObject({ outcome: 'stopped', sessionId: id, turnId });
    expect(body.report).toMatchObject({ reason: 'cancel.user', settledCooperatively: true, hardStopped: { workers: 0, processGroups: 0, questions: 0 } });
    const aborted = await events.next('turn_aborted', (e) => e.data.turnId === turnId, 1000);
    expect(aborted.data.reason).toBe('cancel.user');
    // The stop's timeline, for a page that did not send the stop: kept by the instance that ran the turn.
    expect(await server.get(`/api/sessions/${id}/turns/${turnId}/report`)).toEqual({ status: 200, body: body.report });
    expect((await server.get(`/api/sessions/${id}/turns/turn-never/report`)).status).toBe(404);
    expect(events.events.some((e) => e.type === 'tool_output')).toBe(false);
    expect((await server.get('/healthz')).body.stats.pool).toMatchObject({ running: 0, cooperativeStops: 1, hardStops: 0 });
    expectStoppedHistory(await history(id), turnId, 'crunch');
    // A second stop finds nothing running and changes nothing.
    expect((await server.post(`/api/sessions/${id}/stop`, {})).body).toEqual({ outcome: 'not_found', sessionId: id });
  });

  it('stops a shell tool: every pid of its process tree is gone, and what it printed is on the page and in the history', async () => {
    const { id, events } = await session();
    const turnId = await startTurn(id, 'shell');
    const call = await events.next('tool_call', (e) => e.data.name === 'shell');
    // Its first line arrives while it runs (tool_progress, as exec's onOutput reads it).
    const progress = await events.next('tool_progress', (e) => e.data.turnId === turnId);
    expect(progress.data).toEqual({ sessionId: id, turnId, callId: call.data.callId, name: 'shell', data: { stream: 'stdout', text: 'two sleepers started, 30 s\n' } });
    expect(progress.rawId).toBeUndefined(); // live only: not in the history, so no id
    // The tree: sh and its two sleeps, all descendants of the server process.
    await eventually(() => toolTree(server.pid).length === 3, 10_000, 'sh and two sleeps');
    const tree = toolTree(server.pid);
    const { body } = await server.post(`/api/sessions/${id}/stop`, { reason: 'cancel.user' });
    expect(body.outcome).toBe('stopped');
    for (const pid of tree) expect(isGone(pid), `pid ${pid}`).toBe(true);
    await events.next('turn_aborted', (e) => e.data.turnId === turnId, 1000);
    const entries = await history(id);
    expectStoppedHistory(entries, turnId, 'shell');
    // The stopped call keeps what the command had printed, for the next turn's model.
    expect(entries.find((e: any) => e.type === 'tool_aborted')).toMatchObject({ callId: call.data.callId, partial: { output: 'two sleepers started, 30 s\n', progress: true } });
  });

  it('stops a turn waiting on a question: the question is withdrawn and a late answer is refused', async () => {
    const { id, events } = await session();
    const turnId = await startTurn(id, 'ask');
    const question = await events.next('question', (e) => e.data.turnId === turnId);
    const { body } = await server.post(`/api/sessions/${id}/stop`, { reason: 'cancel.user' });
    expect(body).toMatchObject({ outcome: 'stopped', turnId, report: { hardStopped: { questions: 1 } } });
    await events.next('turn_aborted', (e) => e.data.turnId === turnId, 1000);
    expect(await server.post(`/api/questions/${question.data.questionId}/answer`, { answer: 'too late' }))
      .toEqual({ status: 200, body: { accepted: false, outcome: 'not_found', questionId: question.data.questionId } });
    expectStoppedHistory(await history(id), turnId, 'ask');
  });

  it('stops while the reply streams; the next Send runs a fresh turn to completion', async () => {
    const { id, events } = await session();
    const first = await startTurn(id, 'crunch');
    await events.next('say', (e) => e.data.turnId === first);
    expect((await server.post(`/api/sessions/${id}/stop`, {})).body.outcome).toBe('stopped');
    await events.next('turn_aborted', (e) => e.data.turnId === first, 1000);
    const said = events.events.filter((e) => e.type === 'say' && e.data.turnId === first).length;
    const second = await startTurn(id, 'hello again');
    await events.next('status', (e) => e.data.status === 'completed' && e.data.turnId === second);
    // Nothing of the stopped turn arrived after its turn_aborted.
    expect(events.events.filter((e) => e.type === 'say' && e.data.turnId === first).length).toBe(said);
  });
});

describe('agent server: the page names its turns', () => {
  it('runs a turn under the id the client sends, and refuses that id a second time', async () => {
    const { id, events } = await session();
    const turnId = `turn-client-${randomUUID()}`;
    expect(await server.post(`/api/sessions/${id}/turns`, { prompt: 'hello', turnId })).toEqual({ status: 202, body: { turnId, node: expect.any(String) } });
    await events.next('status', (e) => e.data.status === 'completed' && e.data.turnId === turnId);
    const again = await server.post(`/api/sessions/${id}/turns`, { prompt: 'hello', turnId });
    expect(again.status).toBe(409);
    expect(again.body.error).toMatch(/^turnId: ".*" is already used/);
    expect((await server.post(`/api/sessions/${id}/turns`, { prompt: 'hello', turnId: 'a b' })).status).toBe(400);
  });

  it('a Stop naming a turn whose Send has not landed yet stops it: it starts cancelled and runs nothing', async () => {
    const { id, events } = await session();
    const turnId = `turn-client-${randomUUID()}`;
    // The Stop first (the page's POST /turns is still on its way)...
    const stop = await server.post(`/api/sessions/${id}/stop`, { turnId });
    expect(stop).toEqual({ status: 202, body: { outcome: 'pending', sessionId: id, turnId, reason: 'cancel.user', graceMs: expect.any(Number), expiresAt: expect.any(Number) } });
    // ...then the Send: accepted, and the turn ends cancelled without a token or a tool of it.
    expect((await server.post(`/api/sessions/${id}/turns`, { prompt: 'shell', turnId })).status).toBe(202);
    const aborted = await events.next('turn_aborted', (e) => e.data.turnId === turnId, 2000);
    expect(aborted.data.reason).toBe('cancel.user');
    await events.next('status', (e) => e.data.turnId === turnId && e.data.status === 'cancelled');
    expect(events.events.filter((e) => e.data.turnId === turnId).map((e) => e.type)).toEqual(['turn_started', 'status', 'turn_aborted', 'status']);
    expect(toolTree(server.pid)).toEqual([]);
    const entries = (await history(id)).filter((e) => e.turnId === turnId);
    expect(entries[0]).toMatchObject({ type: 'turn_started', input: 'shell' });
    expect(entries.some((e) => e.type === 'say' || e.type === 'tool_call')).toBe(false);
    expect(entries.filter((e) => e.type === 'status').at(-1)).toMatchObject({ status: 'cancelled', reason: 'cancel.user' });
    // The session is free: the next turn runs.
    const next = await startTurn(id, 'hello again');
    await events.next('status', (e) => e.data.status === 'completed' && e.data.turnId === next);
    // A stop naming a finished turn says so.
    expect((await server.post(`/api/sessions/${id}/stop`, { turnId })).body).toEqual({ outcome: 'already_finished', sessionId: id, turnId, status: 'cancelled' });
  });
});

describe('agent server: event stream', () => {
  it('replays exactly the missed events to a client reconnecting with Last-Event-ID', async () => {
    const { id, events } = await session();
    const turnId = await startTurn(id, 'hello');
    await events.next('say', () => events.events.length >= 4);
    events.close();
    const seen = events.events.slice(0, 4);
    const all = await server.events(id);
    streams.push(all);
    await all.next('status', (e) => e.data.status === 'completed' && e.data.turnId === turnId);
    const resumed = await server.events(id, seen[3].rawId);
    streams.push(resumed);
    await resumed.next('status', (e) => e.data.status === 'completed' && e.data.turnId === turnId, 2000);
    expect(resumed.events.map((e) => e.id)).toEqual(all.events.slice(4).map((e) => e.id));
    expect([...seen, ...resumed.events]).toEqual(all.events);
  });
});

/**
 * The runner's events, as the page reads them, into each session's stream. The runner emits
 * after the ledger write, so what the page shows is already history; once a turn has ended the
 * runner emits nothing more of it, so a stopped turn's late tokens never reach the page.
 */
import type { TurnRunner } from '../../src/index.js';
import type { EventType, Sessions } from './sessions.js';

type Payload = { sessionId: string; turnId: string } & Record<string, unknown>;

/** What each runner event carries to the page, besides its `turnId`. */
const SHAPES: [Exclude<EventType, 'turn_started' | 'tool_call'>, (p: Payload) => Record<string, unknown>][] = [
  // A running command's output (call.progress): shown under its call as it comes.
  ['tool_progress', (p) => ({ callId: p.callId, name: p.name, data: p.data })],
  ['say', (p) => ({ text: p.text })],
  ['tool_output', (p) => ({ callId: p.callId, name: p.name, output: p.output, success: p.success })],
  ['question', (p) => ({ questionId: p.questionId, question: p.question })],
  ['turn_completed', (p) => ({ value: p.value })],
  ['turn_failed', (p) => ({ error: errorText(p.error) })],
  ['turn_aborted', (p) => ({ report: p.report })],
];

/** Publishes the runner's events into the sessions' streams, for as long as the runner lives. */
export function forwardRunnerEvents(runner: TurnRunner, sessions: Sessions, nodeId: string): void {
  runner.on('turn_started', (p: Payload) => {
    const session = sessions.getOrCreate(p.sessionId);
    if (session === undefined) return;
    sessions.publish(session, 'turn_started', { turnId: p.turnId, prompt: session.turnId === p.turnId ? session.prompt ?? null : null, node: nodeId });
  });
  for (const [type, shape] of SHAPES) {
    runner.on(type, (p: Payload) => {
      const session = sessions.getOrCreate(p.sessionId);
      if (session === undefined) return;
      sessions.publish(session, type, { turnId: p.turnId, ...shape(p) });
      // The terminal event frees the session at once, so a Send right after it is not a 409.
      if (type === 'turn_completed' || type === 'turn_failed' || type === 'turn_aborted') session.endTurn(p.turnId);
    });
  }
}

/** An error as one line of text for the page. */
export function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

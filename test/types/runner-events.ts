// Compiled, never run, by test/types.test.ts: what the runner's typed events and outcome accept.
import { TurnRunner, type TurnOutcome } from 'fullstop';

declare const runner: TurnRunner;
declare const outcome: TurnOutcome<number>;

runner.on('turn_aborted', ({ report }) => report.graceMs);
runner.on('tool_call', ({ callId, name }) => `${callId}${name}`);
runner.on('turn_started', ({ input }) => input);
// @ts-expect-error a report has no such field
runner.on('turn_aborted', ({ report }) => report.nonexistent);
// @ts-expect-error no such event
runner.on('no_such_event', () => {});
// @ts-expect-error a completed turn has no report: narrow on status first
outcome.report;
if (outcome.status === 'cancelled') outcome.report.reason.toUpperCase();
if (outcome.status === 'completed') outcome.value.toFixed();
// The stop's reason, live output, and what became of a stop sent before its turn.
runner.on('turn_aborted', ({ reason }) => reason.toUpperCase());
runner.on('tool_progress', ({ callId, name, data }) => [callId, name, data]);
runner.on('stop_pending', ({ expiresAt, graceMs, reason }) => expiresAt + graceMs + reason.length);
runner.on('stop_refused', ({ why }) => why === 'session_full' || why === 'book_full' || why === 'disabled');
// @ts-expect-error a refusal is one of three
runner.on('stop_refused', ({ why }) => why === 'full');
const answer = runner.requestStop('s', { turnId: 't' });
if (answer.outcome === 'stopping') void answer.report.then((r) => r.flushedAt);
if (answer.outcome === 'pending') answer.expiresAt.toFixed();
// @ts-expect-error only a stop under way has a report: narrow on outcome first
void answer.report;
if (answer.outcome === 'already_finished') void answer.status?.toUpperCase();
// @ts-expect-error one vocabulary: nothing to stop is not_found (not_running is gone)
void (answer.outcome === 'not_running');
const reply: import('fullstop').AnswerReply = runner.answer('q', 'yes');
if (reply.outcome === 'accepted') reply.node.toUpperCase();
// @ts-expect-error runner.answer says what became of the answer; it is not a boolean
const taken: boolean = runner.answer('q', 'yes');
declare const turn: import('fullstop').Turn;
void turn.tool('t', {}, async (_token, call) => { call.progress({ stream: 'stdout', text: 'x' }); return call.callId + call.name; });

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

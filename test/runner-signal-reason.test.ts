/**
 * Reasons from frameworks (DESIGN §11.2): a caller's `signal` given to `run` stops the turn with
 * `signalReason` (default `cancel.client`); the signal's own reason — Hono's "Client connection
 * prematurely closed.", BullMQ's "user pressed stop", an Error, a DOMException — is kept as the
 * stop's `detail` (report, `turn_aborted` event, the `cancelling` entry), never taken for the reason.
 */
import { describe, expect, it } from 'vitest';
import { MAX_STOP_DETAIL_LENGTH, MAX_ID_LENGTH, StopReasons, TURN_ABORTED_MARKER, type LedgerEntry, type StopReport } from '../dist/src/index.js';
import { runnerScene, turnInATool } from './support/runner-scene.js';

const scene = runnerScene('fullstop-runner-signal-reason-');

const HONO = 'Client connection prematurely closed.';

function entriesOf(sessionId: string): Array<LedgerEntry & Record<string, unknown>> {
  return scene.onDisk().filter((e) => e.sessionId === sessionId) as Array<LedgerEntry & Record<string, unknown>>;
}

describe('run(…, { signal, signalReason })', () => {
  it('a signal aborted with Hono\'s text: cancelled with reason cancel.client, the text as detail; the marker does not say the user stopped it', async () => {
    const events: Array<{ reason: string; detail?: string; report: StopReport }> = [];
    scene.runner.on('turn_aborted', (e) => events.push(e));
    const caller = new AbortController();
    const { outcome: outcome$ } = await turnInATool(scene.runner, 's', { signal: caller.signal });
    caller.abort(HONO);
    const outcome = await outcome$;
    expect(outcome.status).toBe('cancelled');
    if (outcome.status !== 'cancelled') return;
    expect(outcome.report).toMatchObject({ reason: StopReasons.client, detail: HONO });
    expect(outcome.error.reason).toBe(StopReasons.client);
    expect(events).toMatchObject([{ reason: StopReasons.client, detail: HONO, report: { reason: StopReasons.client, detail: HONO } }]);
    const entries = entriesOf('s');
    expect(entries.find((e) => e.type === 'status' && e.status === 'cancelling')).toMatchObject({ reason: StopReasons.client, detail: HONO });
    const marker = entries.find((e) => e.type === 'turn_aborted')!;
    expect(marker).toMatchObject({ reason: StopReasons.client });
    expect(marker.text).not.toMatch(/user stopped/i);
    expect(marker.text).toMatch(/the client cancelled its request/);
    expect(entries.find((e) => e.type === 'tool_aborted')!.output).not.toMatch(/by user/);
    expect(entries.at(-1)).toMatchObject({ type: 'status', status: 'cancelled', reason: StopReasons.client });
  });

  it('signalReason cancel.disconnect is the reason; the text stays detail', async () => {
    const caller = new AbortController();
    const { outcome: outcome$ } = await turnInATool(scene.runner, 's', { signal: caller.signal, signalReason: StopReasons.disconnect });
    caller.abort(HONO);
    const outcome = await outcome$;
    expect(outcome).toMatchObject({ status: 'cancelled', report: { reason: 'cancel.disconnect', detail: HONO } });
    expect(entriesOf('s').find((e) => e.type === 'turn_aborted')!.text).toMatch(/the client disconnected/);
  });

  it('signalReason cancel.user (BullMQ\'s "user pressed stop"): the marker says the user stopped it; the words are detail', async () => {
    const caller = new AbortController();
    const { outcome: outcome$ } = await turnInATool(scene.runner, 's', { signal: caller.signal, signalReason: StopReasons.user });
    caller.abort('user pressed stop');
    expect(await outcome$).toMatchObject({ status: 'cancelled', report: { reason: 'cancel.user', detail: 'user pressed stop' } });
    expect(entriesOf('s').find((e) => e.type === 'turn_aborted')!.text).toBe(TURN_ABORTED_MARKER);
  });

  it('an Error or a DOMException as the signal\'s reason: its text is detail; a user\'s own code is the reason', async () => {
    const caller = new AbortController();
    const { outcome: outcome$ } = await turnInATool(scene.runner, 's', { signal: caller.signal, signalReason: 'gateway.timeout' });
    caller.abort(new Error('socket hang up'));
    expect(await outcome$).toMatchObject({ report: { reason: 'gateway.timeout', detail: 'socket hang up' } });
    // abort() with nothing: the signal's reason is a DOMException named AbortError.
    const plain = new AbortController();
    const { outcome: second$ } = await turnInATool(scene.runner, 't', { signal: plain.signal });
    plain.abort();
    const second = await second$;
    expect(second).toMatchObject({ report: { reason: 'cancel.client' } });
    if (second.status === 'cancelled') expect(second.report.detail).toMatch(/^AbortError: /);
  });

  it('an already aborted signal: nothing of the body runs; reason and detail as for a later abort', async () => {
    let ran = false;
    const outcome = await scene.runner.run('s', async () => { ran = true; }, { signal: AbortSignal.abort(HONO), signalReason: StopReasons.disconnect });
    expect(ran).toBe(false);
    expect(outcome).toMatchObject({ status: 'cancelled', report: { reason: 'cancel.disconnect', detail: HONO } });
  });

  it('a long reason of the signal is kept as a bounded detail (at most MAX_STOP_DETAIL_LENGTH characters)', async () => {
    const outcome = await scene.runner.run('s', async () => 1, { signal: AbortSignal.abort('x'.repeat(100_000)) });
    expect(outcome.status).toBe('cancelled');
    if (outcome.status !== 'cancelled') return;
    expect(outcome.report.detail!.length).toBeLessThanOrEqual(MAX_STOP_DETAIL_LENGTH);
    expect(outcome.report.detail!.startsWith('xxxx')).toBe(true);
  });

  it('as runner.stop: the cancelling intent is on disk before the turn\'s signal aborts', async () => {
    const caller = new AbortController();
    let onDiskAtAbort: LedgerEntry[] = [];
    const outcome$ = scene.runner.run('s', (turn) => new Promise((resolve) => {
      turn.signal.addEventListener('abort', () => { onDiskAtAbort = scene.onDisk(); resolve(undefined); }, { once: true });
      caller.abort(HONO);
    }), { signal: caller.signal, signalReason: StopReasons.disconnect });
    expect(await outcome$).toMatchObject({ status: 'cancelled', report: { reason: 'cancel.disconnect' } });
    expect(onDiskAtAbort.find((e) => e.type === 'status' && e.status === 'cancelling')).toMatchObject({ reason: 'cancel.disconnect', detail: HONO });
  });

  it('a stop by runner.stop has no detail', async () => {
    const { outcome: outcome$ } = await turnInATool(scene.runner, 's', {});
    await scene.runner.stop('s');
    const outcome = await outcome$;
    expect(outcome.status === 'cancelled' && 'detail' in outcome.report).toBe(false);
    expect(entriesOf('s').find((e) => e.type === 'status' && e.status === 'cancelling')).not.toHaveProperty('detail');
  });

  it('a bad signalReason, or one without a signal, is refused naming options.signalReason before anything runs', async () => {
    const signal = new AbortController().signal;
    const refusals: Array<[unknown, ErrorConstructor | RangeErrorConstructor]> = [
      [{ signal, signalReason: '' }, TypeError],
      [{ signal, signalReason: 42 }, TypeError],
      [{ signal, signalReason: 'x'.repeat(MAX_ID_LENGTH + 1) }, RangeError],
      [{ signalReason: StopReasons.disconnect }, TypeError],
    ];
    let ran = false;
    for (const [options, type] of refusals) {
      const error = await scene.runner.run('s', async () => { ran = true; }, options as never).then(() => undefined, (e: unknown) => e);
      expect(error).toBeInstanceOf(type);
      expect((error as Error).message).toMatch(/^options\.signalReason/);
    }
    expect(ran).toBe(false);
    expect(entriesOf('s')).toEqual([]);
  });
});

/**
 * The history tells the model the truth about a stop: only the user's own Stop says the user
 * stopped the turn; a deploy, a client that went away, a lost lease say what stopped it, and that
 * the user did not ask for it, so the model may resume the work.
 */
import { describe, expect, it } from 'vitest';
import { appendFileSync } from 'node:fs';
import {
  abortedToolText, FleetReasons, Ledger, spawnBackground, StopReasons, stopCause, TURN_ABORTED_MARKER, turnAbortedMarker,
  type BackgroundProcess, type CancelToken, type LedgerEntry,
} from '../dist/src/index.js';
import { isGone } from './support/leaks.js';
import { runnerScene, turnInATool } from './support/runner-scene.js';

const scene = runnerScene('fullstop-runner-texts-');

/** Every reason fullstop gives besides the user's own, and a caller's own code. */
const NOT_THE_USER = [
  StopReasons.shutdown, StopReasons.disconnect, StopReasons.client, StopReasons.timeout,
  FleetReasons.leaseLost, FleetReasons.closed, FleetReasons.restart, FleetReasons.leaseExpired, 'deploy',
];

function byType(sessionId: string, type: LedgerEntry['type']): Record<string, unknown> {
  return scene.onDisk().find((e) => e.sessionId === sessionId && e.type === type) as unknown as Record<string, unknown>;
}

describe('a stop by the user (cancel.user)', () => {
  it('keeps today\'s texts: "The user stopped this turn on purpose" and "aborted by user after N.Ns"; turn_aborted records its reason', async () => {
    const { outcome } = await turnInATool(scene.runner, 'u');
    const reasons: string[] = [];
    scene.runner.on('turn_aborted', ({ reason }) => reasons.push(reason));
    await scene.runner.stop('u');
    expect((await outcome).status).toBe('cancelled');
    expect(byType('u', 'tool_aborted').output).toMatch(/^aborted by user after \d+\.\ds$/);
    expect(byType('u', 'turn_aborted')).toMatchObject({ text: TURN_ABORTED_MARKER, reason: 'cancel.user' });
    expect(TURN_ABORTED_MARKER).toBe('The user stopped this turn on purpose. Tools that were aborted may have partly executed, so ' +
      'check their effects before relying on them.');
    expect(reasons).toEqual(['cancel.user']);
  });
});

describe('the marker on background processes', () => {
  const SENTENCE = 'Background processes started during the turn may still be running.';

  /**
   * A turn whose tool call runs `inTool`, then waits for the stop; `beforeStop` runs outside the
   * turn once the call is inside; then the turn is stopped with `reason`. Resolves with its marker.
   */
  async function markerAfter(sessionId: string, steps: { inTool?: () => Promise<unknown> | void; beforeStop?: (token: CancelToken) => void; reason?: string }): Promise<string> {
    let inside!: (token: CancelToken) => void;
    const entered = new Promise<CancelToken>((r) => { inside = r; });
    const outcome = scene.runner.run(sessionId, (turn) => turn.tool('serve', {}, async (token) => {
      await steps.inTool?.();
      inside(token);
      await new Promise((r) => token.signal.addEventListener('abort', r));
      throw token.signal.reason;
    }));
    const token = await entered; // not inside `?.()`: a missing beforeStop would skip the await
    steps.beforeStop?.(token);
    await scene.runner.stop(sessionId, steps.reason === undefined ? {} : { reason: steps.reason });
    expect((await outcome).status).toBe('cancelled');
    return byType(sessionId, 'turn_aborted').text as string;
  }

  it('says nothing of them when the turn started none (one of no turn is running meanwhile)', async () => {
    const outside = spawnBackground('sleep', ['60']);
    try {
      const text = await markerAfter('none', {});
      expect(text).not.toContain('Background processes');
      expect(text).toBe(TURN_ABORTED_MARKER);
    } finally {
      await outside.kill();
    }
  });

  it.each([undefined, StopReasons.shutdown])('says they may still run when one the turn started is alive at the stop (reason %s)', async (reason) => {
    let server: BackgroundProcess | undefined;
    try {
      // Started in the tool without a token: the turn's (ambient) token says whose it is.
      const text = await markerAfter('bg', { inTool: () => { server = spawnBackground('sleep', ['60']); }, reason });
      expect(text).toContain(SENTENCE);
      expect(text).toBe(turnAbortedMarker(reason, { backgroundRunning: true }));
      expect(isGone(server!.pid)).toBe(false); // a stop does not reach it
    } finally {
      await server?.kill();
    }
  });

  it('counts one started with the turn\'s token (outside the turn\'s context) as the turn\'s', async () => {
    let server: BackgroundProcess | undefined;
    try {
      const text = await markerAfter('given', { beforeStop: (token) => { server = spawnBackground('sleep', ['60'], { token }); } });
      expect(text).toContain(SENTENCE);
    } finally {
      await server?.kill();
    }
  });

  it('does not count one the turn started that has exited by the stop', async () => {
    const text = await markerAfter('exited', { inTool: async () => { await spawnBackground('true').exited; } });
    expect(text).toBe(TURN_ABORTED_MARKER);
  });
});

describe('a stop for any other reason', () => {
  it.each(NOT_THE_USER)('%s: the texts say what stopped the turn, never that the user did', async (reason) => {
    const { outcome } = await turnInATool(scene.runner, 'o');
    const events: Array<{ reason: string; report: { reason: string } }> = [];
    scene.runner.on('turn_aborted', (p) => events.push(p));
    await scene.runner.stop('o', { reason });
    expect((await outcome).status).toBe('cancelled');
    const aborted = byType('o', 'tool_aborted').output as string;
    const marker = byType('o', 'turn_aborted');
    expect(aborted).toMatch(new RegExp(`^aborted after \\d+\\.\\ds: ${escape(stopCause(reason))}$`));
    expect(marker).toMatchObject({ text: turnAbortedMarker(reason), reason });
    for (const text of [aborted, marker.text as string]) {
      expect(text).not.toMatch(/by (the )?user|on purpose|user stopped/i);
    }
    expect(marker.text).toMatch(/the user did not ask for the stop/);
    expect(marker.text).not.toMatch(/Background processes/); // the turn started none
    expect(marker.text).toMatch(/partly executed/);
    expect(events.map((e) => [e.reason, e.report.reason])).toEqual([[reason, reason]]);
  });

  it('names the server shutting down in so many words', () => {
    expect(abortedToolText(2345, StopReasons.shutdown)).toBe('aborted after 2.3s: the server shut down');
    expect(abortedToolText(2345)).toBe('aborted by user after 2.3s');
    expect(abortedToolText(2345, StopReasons.user)).toBe('aborted by user after 2.3s');
    expect(turnAbortedMarker()).toBe(TURN_ABORTED_MARKER);
    expect(turnAbortedMarker(StopReasons.shutdown)).toMatch(/^This turn was stopped because the server shut down; the user did not ask/);
    expect(stopCause('x'.repeat(1024))).toHaveLength('a stop with reason ""…'.length + 200);
    expect(() => abortedToolText(1, 5 as unknown as string)).toThrow(TypeError);
  });

  it('shutdown writes the shutdown texts', async () => {
    const { outcome } = await turnInATool(scene.runner, 'd');
    await scene.runner.shutdown();
    await outcome;
    expect(byType('d', 'tool_aborted').output).toMatch(/^aborted after \d+\.\ds: the server shut down$/);
    expect(byType('d', 'turn_aborted')).toMatchObject({ reason: 'cancel.shutdown' });
  });

  it('a caller\'s aborted signal (a client that went away) writes its reason\'s texts', async () => {
    const controller = new AbortController();
    let inside!: () => void;
    const entered = new Promise<void>((r) => { inside = r; });
    const outcome = scene.runner.run('c', (turn) => turn.tool('t', {}, async (token) => {
      inside();
      await new Promise((r) => token.signal.addEventListener('abort', r));
    }), { signal: controller.signal, signalReason: StopReasons.disconnect });
    await entered;
    controller.abort('Client connection prematurely closed.');
    expect((await outcome).status).toBe('cancelled');
    expect(byType('c', 'tool_aborted').output).toMatch(/: the client disconnected$/);
    expect(byType('c', 'turn_aborted')).toMatchObject({ reason: 'cancel.disconnect' });
  });
});

describe('Ledger.open repairing a stop a crash cut short', () => {
  it('writes the texts of the recorded reason', async () => {
    const path = scene.ledger.path;
    await scene.ledger.close();
    const at = Date.now();
    const lines = [
      { seq: 1, at, sessionId: 's', turnId: 't', type: 'turn_started' },
      { seq: 2, at, sessionId: 's', turnId: 't', type: 'tool_call', callId: 'c1', name: 'build', args: null },
      { seq: 3, at: at + 2345, sessionId: 's', turnId: 't', type: 'status', status: 'cancelling', reason: FleetReasons.leaseLost },
      { seq: 4, at, sessionId: 's', turnId: 'u', type: 'turn_started' },
      { seq: 5, at, sessionId: 's', turnId: 'u', type: 'status', status: 'cancelling', reason: 'cancel.user' },
    ];
    appendFileSync(path, lines.map((l) => `${JSON.stringify(l)}\n`).join(''));
    scene.ledger = await Ledger.open(path);
    const repaired = scene.onDisk().slice(lines.length);
    expect(repaired.map(({ at: _at, seq: _seq, ...rest }) => rest)).toEqual([
      { sessionId: 's', turnId: 't', type: 'tool_aborted', callId: 'c1', output: 'aborted after 2.3s: the server running it lost its lease' },
      { sessionId: 's', turnId: 't', type: 'turn_aborted', text: turnAbortedMarker(FleetReasons.leaseLost), reason: 'lease.lost' },
      { sessionId: 's', turnId: 't', type: 'status', status: 'cancelled', reason: 'lease.lost' },
      { sessionId: 's', turnId: 'u', type: 'turn_aborted', text: TURN_ABORTED_MARKER, reason: 'cancel.user' },
      { sessionId: 's', turnId: 'u', type: 'status', status: 'cancelled', reason: 'cancel.user' },
    ]);
  });
});

describe('FleetReasons', () => {
  it('are the codes a fleet writes, frozen', () => {
    expect(FleetReasons).toEqual({ leaseLost: 'lease.lost', leaseExpired: 'lease.expired', closed: 'fleet.closed', restart: 'restart' });
    expect(Object.isFrozen(FleetReasons)).toBe(true);
  });
});

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

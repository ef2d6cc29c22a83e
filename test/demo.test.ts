import { describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { isGone } from './support/leaks.js';

const demo = fileURLToPath(new URL('../dist/examples/demo.js', import.meta.url));

describe('the demo (npm start)', () => {
  it('stops a real turn with --stop-after 100 --json: cancelled, no survivors, stats zero, a clean second turn', async () => {
    const { code, stdout, stderr } = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      execFile(process.execPath, [demo, '--stop-after', '100', '--json'], { timeout: 60_000 }, (error, stdout, stderr) => {
        resolve({ code: error ? (error as { code?: number }).code ?? 1 : 0, stdout, stderr });
      });
    });
    expect(code, stderr).toBe(0);
    const report = JSON.parse(stdout);
    expect(report.status).toBe('cancelled');
    expect(report.survivors).toEqual([]);
    expect(report.treePids.length).toBeGreaterThanOrEqual(5);
    for (const pid of report.treePids) expect(isGone(pid)).toBe(true);
    expect(report.stats).toEqual({ liveTokens: 0, liveSlots: 0, liveBridges: 0, liveOwners: 0 });
    expect(report.secondTurn).toEqual({ status: 'completed', markerInHistory: true });
    const r = report.report;
    expect(r).toMatchObject({ sessionId: 'demo', turnId: 'turn-1', reason: 'cancel.user', graceMs: 100 });
    // The report's times against what the demo saw itself. The demo's clock starts when it calls
    // runner.stop, the report's a moment later (by `offset` >= 0, unbounded on a loaded machine), so a
    // demo mark is the report's moment plus `offset`. The demo marks "turn_aborted emitted" after
    // stop() resolved, at or after the report's emittedAt: that bounds `offset` without a clock slack.
    const seen = (pattern: RegExp) => (report.timeline as { layer: string; ms: number }[]).find((t) => pattern.test(t.layer))!.ms;
    const offset = seen(/turn_aborted emitted/) - r.emittedAt;
    expect(offset).toBeGreaterThanOrEqual(0);
    expect(seen(/token\.signal aborted/)).toBeLessThanOrEqual(r.signalledAt + offset);
    // A pending question is rejected by the hard stop: after the grace, before hardStopAt.
    expect(seen(/question rejected/)).toBeGreaterThanOrEqual(r.settledAt);
    expect(seen(/question rejected/)).toBeLessThanOrEqual(r.hardStopAt + offset);
    expect(r.ledgerError).toBeUndefined();
    expect(report.timeline.map((t: { layer: string }) => t.layer)).toEqual(expect.arrayContaining([
      expect.stringMatching(/worker saw the stop/), expect.stringMatching(/process tree gone/), expect.stringMatching(/question rejected/),
    ]));
  }, 90_000);

  it('refuses a bad flag value with a clear error', async () => {
    const { code, stderr } = await new Promise<{ code: unknown; stderr: string }>((resolve) => {
      execFile(process.execPath, [demo, '--grace=-5'], { timeout: 30_000 }, (error, _stdout, stderr) => resolve({ code: (error as { code?: unknown } | null)?.code, stderr }));
    });
    expect(code).toBe(2);
    expect(stderr).toMatch(/--grace: expected milliseconds >= 0, got -5/);
  });
});

/**
 * The fleet demo (`npm start -- --fleet`): two instances in two processes, the stop sent to the
 * one that does not run the turn.
 */
import { describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { redisReachable, REDIS_PORT } from './fixtures/fleet/support.js';

const demo = fileURLToPath(new URL('../dist/examples/demo.js', import.meta.url));
const up = await redisReachable();
if (!up) console.warn(`fleet demo test skipped: no Redis at 127.0.0.1:${REDIS_PORT} (start one with: redis-server --port ${REDIS_PORT}; CI always has it)`);

function runDemo(args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [demo, ...args], { timeout: 60_000, env: { ...process.env, ...env } }, (error, stdout, stderr) => {
      resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

describe('npm start -- --fleet', () => {
  it.skipIf(!up)('stops instance A\'s turn from instance B: answer stopped, record cancelled, A\'s ledger in stop order', async () => {
    const { code, stdout, stderr } = await runDemo(['--fleet', '--json'], { REDIS_PORT: String(REDIS_PORT) });
    expect(code, stderr).toBe(0);
    const report = JSON.parse(stdout.trim().split('\n').at(-1)!);
    expect(report.answer).toMatchObject({ outcome: 'stopped', sessionId: 'demo', turnId: 'turn-1', node: 'instance-a' });
    expect(report.answer.report).toMatchObject({ reason: 'cancel.user', turnId: 'turn-1' });
    expect(report.record).toMatchObject({ status: 'cancelled', requester: 'instance-b' });
    expect(report.secondStop).toBe('already_finished');
    expect(report.ledger).toEqual(['turn_started', 'say', 'tool_call', 'status:cancelling', 'tool_aborted', 'turn_aborted', 'status:cancelled']);
  }, 90_000);

  it('without Redis, says how to start it and exits 1', async () => {
    // A port that is surely closed: bind one, note it, close it.
    const port = await new Promise<number>((resolve) => {
      const server = createServer().listen(0, '127.0.0.1', () => {
        const p = (server.address() as { port: number }).port;
        server.close(() => resolve(p));
      });
    });
    const { code, stderr } = await runDemo(['--fleet'], { REDIS_PORT: String(port) });
    expect(code).toBe(1);
    expect(stderr).toMatch(new RegExp(`no Redis at 127.0.0.1:${port}`));
    expect(stderr).toMatch(/redis-server --port/);
  }, 60_000);
});

// L4: `Ledger.open` of a 1 GB ledger (docs/benchmarks.md, "L4"): wall time and peak RSS of a process that opens it (and
// repairs its open turns), against a process that only reads the file raw in 1 MiB chunks, counting lines (the floor).
// L5: one session's stop intent (append `cancelling` → flush durable) while another session's 64 MB line is being
// written, against the same intent on an idle ledger. The files live in a temp dir removed after.
import { execFile } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Ledger } from '../src/index.js';
import { compare, median, samplePairs, suiteOf } from './harness.js';

const run = promisify(execFile);
const CHILD = fileURLToPath(new URL('./ledger-open-child.js', import.meta.url));
type OpenSample = { ms: number; cpuMs: number; peakRssMb: number; loopMaxMs: number };

/**
 * Writes a ledger of about `bytes`: 1,000 sessions taking turns, each turn a start, a tool call, a 2 KB output, a say and
 * its end; the last 100 turns are left open (the open repairs them).
 */
export function writeBigLedger(file: string, bytes: number): { lines: number } {
  const fd = openSync(file, 'w');
  const output = 'o'.repeat(2000);
  const text = 's'.repeat(400);
  let [seq, size, turn, pending] = [0, 0, 0, [] as string[]];
  const line = (sessionId: string, turnId: string, body: object) => `${JSON.stringify({ seq: ++seq, at: 1_700_000_000_000 + seq, sessionId, turnId, ...body })}\n`;
  while (size < bytes) {
    const [sessionId, turnId] = [`session-${turn % 1000}`, `turn-${turn++}`];
    const open = size > bytes - 100 * 3000;
    const lines = [line(sessionId, turnId, { type: 'turn_started', input: `question ${turn}` }),
      line(sessionId, turnId, { type: 'tool_call', callId: `c${turn}`, name: 'search', args: { q: 'x'.repeat(80) } })];
    if (!open) {
      lines.push(line(sessionId, turnId, { type: 'tool_output', callId: `c${turn}`, output, success: true }),
        line(sessionId, turnId, { type: 'say', text }), line(sessionId, turnId, { type: 'status', status: 'completed' }));
    }
    for (const l of lines) { pending.push(l); size += l.length; }
    if (pending.length >= 4000) { writeSync(fd, pending.join('')); pending = []; }
  }
  writeSync(fd, pending.join(''));
  closeSync(fd);
  return { lines: seq };
}

async function child(mode: 'open' | 'read', file: string, moduleUrl?: string): Promise<OpenSample> {
  const { stdout } = await run(process.execPath, [CHILD, mode, file, ...(moduleUrl ? [moduleUrl] : [])], { maxBuffer: 1 << 20 });
  return JSON.parse(stdout) as OpenSample;
}

export const suite = suiteOf({
  async L4(ctx) {
    const dir = mkdtempSync(join(tmpdir(), 'fullstop-bench-l4-'));
    try {
      const bytes = ctx.quick ? 64 * 1024 * 1024 : 1024 * 1024 * 1024;
      const file = join(dir, 'history.jsonl');
      ctx.progress(`L4: writing a ${bytes >> 20} MB ledger`);
      const { lines } = writeBigLedger(file, bytes);
      const pairs = ctx.quick ? 2 : 3;
      const { samples } = await samplePairs('L4', { pairs, warmup: 0 }, {
        // Each open repairs the open turns once: later opens find them closed (the file grows by their repair only).
        open: () => child('open', file),
        read: () => child('read', file),
      }, ctx);
      return compare({ id: 'L4', metric: `Ledger.open of a ${bytes >> 20} MB ledger (${lines} lines, 1,000 sessions)`, unit: 'ms', extra: {
        goal: 'peak RSS ≤ 256 MB', peakRssMb: { open: Math.round(median(samples.open.map((s) => s.peakRssMb))), read: Math.round(median(samples.read.map((s) => s.peakRssMb))) },
        cpuMs: { open: Math.round(median(samples.open.map((s) => s.cpuMs))), read: Math.round(median(samples.read.map((s) => s.cpuMs))) },
        loopMaxMs: { open: Math.round(median(samples.open.map((s) => s.loopMaxMs))), read: Math.round(median(samples.read.map((s) => s.loopMaxMs))) },
        measure: 'a process per sample: wall ms, getrusage maxrss, monitorEventLoopDelay max', pairs,
      } }, samples.open.map((s) => s.ms), ['the file read raw in 1 MiB chunks, lines counted', samples.read.map((s) => s.ms)]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },

  async L5(ctx) {
    const dir = mkdtempSync(join(tmpdir(), 'fullstop-bench-l5-'));
    const ledger = await Ledger.open(join(dir, 'history.jsonl'));
    try {
      const big = 'x'.repeat(64 * 1024 * 1024);
      let n = 0;
      /** ms from B's `cancelling` append to its flush; with `load`, A's 64 MB line appended just before. */
      const intent = async (load: boolean) => {
        n++;
        const a = load ? ledger.append({ sessionId: 'A', turnId: `a${n}`, type: 'say', text: big }) : undefined;
        await new Promise((resolve) => setImmediate(resolve)); // B's Stop arrives a turn later, A's write under way
        const t0 = performance.now();
        void ledger.append({ sessionId: 'B', turnId: `b${n}`, type: 'status', status: 'cancelling', reason: 'cancel.user' });
        await ledger.flush();
        const ms = performance.now() - t0;
        await a;
        return ms;
      };
      const pairs = ctx.quick ? 3 : 10;
      const { samples } = await samplePairs('L5', { pairs, warmup: 1 }, { busy: () => intent(true), idle: () => intent(false) }, ctx);
      return compare({ id: 'L5', metric: 'B\'s stop intent durable (append cancelling → flush) while A\'s 64 MB line is written', unit: 'ms', extra: {
        note: 'B\'s line follows A\'s in the one file: its sync waits for A\'s write and covers its bytes', pairs,
      } }, samples.busy, ['the same intent on an idle ledger', samples.idle]);
    } finally {
      await ledger.close();
      rmSync(dir, { recursive: true, force: true });
    }
  },
});

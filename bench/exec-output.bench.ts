// O1, O1-whole: what `onOutput` costs on a command printing 100 MB. Throughput of
// `exec({ onOutput })` vs `child_process.spawn` reading the pipe itself (the floor), with the same
// `exec` without `onOutput` as the shape; each sample of the three sides in one interleaved round,
// in one run (docs/benchmarks.md, "The rows").
// - O1: the result keeps a head and a tail (`maxBuffer: 1_000_000`), as a tool relaying its output to a
//   UI while giving the model a summary does; the floor reads the pipe raw (counts its bytes).
// - O1-whole: the result keeps all 100 MB (the default `maxBuffer`); the floor reads the pipe as
//   `execFile` does to return a string (decoded as it comes, joined at the end).
// Both sides start the command the same way: detached (a session and process group of its own, as
// exec always does) and, for exec, `containment: 'process-group'`. The row measures the output's
// handling; a child's session (Linux autogroup) or cgroup changes its CPU share on a loaded host,
// which is the containment's cost, not the output's (docs/benchmarks.md).
import { spawn } from 'node:child_process';
import { exec } from '../src/index.js';
import { compare, samplePairs, suiteOf, type SuiteContext } from './harness.js';

const BYTES = 100_000_000;
/** A fast producer of build-like lines, so that the reading side is what is measured. */
const PRINT = ['-c', `yes 'make[2]: Building C object src/CMakeFiles/unit.dir/unit.c.o' | head -c ${BYTES}`];
const HEAD_AND_TAIL = 1_000_000;
const mbPerS = (ms: number) => BYTES / 1e6 / (ms / 1e3);

/** exec of the producer, with or without an onOutput that looks at each chunk (the least a relay does). */
async function viaExec(maxBuffer: number | undefined, withOnOutput: boolean): Promise<number> {
  let seen = 0;
  const onOutput = withOnOutput ? ({ text }: { text: string }) => { seen += text.length; } : undefined;
  const t0 = performance.now();
  const r = await exec('sh', PRINT, { maxBuffer, onOutput, containment: 'process-group' });
  const ms = performance.now() - t0;
  const kept = r.omittedBytes.stdout === 0 ? r.stdout.length : maxBuffer!; // characters of the stream itself (ASCII: bytes)
  if (r.exitCode !== 0 || r.omittedBytes.stdout + kept !== BYTES || (withOnOutput && seen !== BYTES)) {
    throw new Error(`O1: exec kept ${kept} and omitted ${r.omittedBytes.stdout} of ${BYTES} (onOutput ${seen}), exit ${r.exitCode}`);
  }
  return mbPerS(ms);
}

/** The floor: spawn and read the pipe; `asString`: decoded as it comes and joined at the end, as execFile does. */
function viaSpawn(asString: boolean): Promise<number> {
  const t0 = performance.now();
  const child = spawn('sh', PRINT, { stdio: ['ignore', 'pipe', 'ignore'], detached: true });
  let bytes = 0;
  const parts: string[] = [];
  if (asString) child.stdout.setEncoding('utf8').on('data', (text: string) => { parts.push(text); });
  else child.stdout.on('data', (chunk: Buffer) => { bytes += chunk.length; });
  return new Promise((resolve, reject) => child.once('close', (code) => {
    const read = asString ? parts.join('').length : bytes;
    if (code !== 0 || read !== BYTES) reject(new Error(`O1: spawn read ${read} of ${BYTES}, exit ${code}`));
    else resolve(mbPerS(performance.now() - t0));
  }));
}

function row(id: string, maxBuffer: number | undefined, floor: [string, () => Promise<number>]) {
  return async (ctx: SuiteContext) => {
    const pairs = ctx.quick ? 1 : 11;
    const { samples: s } = await samplePairs(id, { pairs, warmup: 1, shuffle: true }, {
      onOutput: () => viaExec(maxBuffer, true), plain: () => viaExec(maxBuffer, false), floor: floor[1],
    }, ctx);
    const kept = maxBuffer === undefined ? 'the whole output kept' : `head and tail kept (maxBuffer ${maxBuffer})`;
    return compare({ id, metric: `throughput, a command printing 100 MB, exec({ onOutput }), ${kept}`, unit: 'MB/s', better: 'higher',
      extra: { goal: '≥ 0.8× floor and shape', bytes: BYTES, pairs, containment: 'process-group', floor: 'detached' } },
    s.onOutput, [floor[0], s.floor], { shape: ['exec, no onOutput', s.plain] });
  };
}

export const suite = suiteOf({
  O1: row('O1', HEAD_AND_TAIL, ['child_process.spawn, pipe read raw', () => viaSpawn(false)]),
  'O1-whole': row('O1-whole', undefined, ['child_process.spawn, pipe read as execFile does', () => viaSpawn(true)]),
});

// L4's measured process (bench/ledger.bench.ts): `node ledger-open-child.js open|read FILE [LEDGER_MODULE_URL]` opens the
// ledger FILE with `Ledger.open` (or, `read`, reads it raw in 1 MiB chunks: the floor), then prints one JSON line:
// { ms, cpuMs, peakRssMb, loopMaxMs } — wall time, CPU time, the process's peak RSS (getrusage maxrss) and the event loop's longest delay.
// A process of its own per sample, so peak RSS is this open's alone. LEDGER_MODULE_URL: another build's ledger (a before figure).
import { open } from 'node:fs/promises';
import { monitorEventLoopDelay } from 'node:perf_hooks';

const [mode, file, moduleUrl] = process.argv.slice(2) as [string, string, string | undefined];
const loop = monitorEventLoopDelay({ resolution: 1 });
loop.enable();
const t0 = performance.now();
if (mode === 'open') {
  const { Ledger } = (await import(moduleUrl ?? new URL('../src/ledger/ledger.js', import.meta.url).href)) as typeof import('../src/ledger/ledger.js');
  const ledger = await Ledger.open(file);
  await ledger.close();
} else {
  const handle = await open(file, 'r');
  const chunk = Buffer.allocUnsafe(1024 * 1024);
  let lines = 0;
  for (let position = 0; ;) {
    const { bytesRead } = await handle.read(chunk, 0, chunk.length, position);
    if (bytesRead === 0) break;
    position += bytesRead;
    for (let i = chunk.indexOf(10); i !== -1 && i < bytesRead; i = chunk.indexOf(10, i + 1)) lines++;
  }
  await handle.close();
  if (lines === 0) throw new Error('read: no line');
}
const ms = performance.now() - t0;
loop.disable();
const { user, system } = process.cpuUsage();
process.stdout.write(`${JSON.stringify({ ms, cpuMs: (user + system) / 1000, peakRssMb: process.resourceUsage().maxRSS / 1024, loopMaxMs: loop.max / 1e6 })}\n`);

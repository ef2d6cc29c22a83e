/**
 * `fullstop probe`: run one probe (task or exec mode), then print the table on stdout and write
 * the JSON and SVG files asked for. Ctrl-C stops the probe the way a stop stops a turn: what it
 * runs is cancelled (the pool destroyed, the command's tree stopped), then it exits 130.
 */

import { statSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { probeExec } from './exec-probe.js';
import { progressBar } from './progress.js';
import { toResult, type ProbeResult } from './result.js';
import { histogramSvg } from './svg.js';
import { table } from './table.js';
import { probeTask } from './task-probe.js';
import { HELP, parseProbeArgs, UsageError } from './usage.js';

/** Run `fullstop probe <argv>`; resolves with the exit code, rejects with `UsageError` or `Interrupted`. */
export async function probeCommand(argv: readonly string[]): Promise<number> {
  const o = parseProbeArgs(argv);
  if (o === 'help') {
    process.stdout.write(HELP + '\n');
    return 0;
  }
  // Found out now, not after a probe of minutes.
  for (const [flag, file] of [['--json', o.json], ['--svg', o.svg]] as const) {
    if (file !== undefined && !isDirectory(dirname(resolve(file)))) throw new UsageError(`${flag}: no such directory: ${dirname(file)}`);
  }
  const interrupt = new AbortController();
  // A second Ctrl-C while the first is being honoured leaves at once; exec's exit hook still
  // SIGKILLs any child tree on the way out.
  const onSigint = () => (interrupt.signal.aborted ? process.exit(130) : interrupt.abort());
  process.on('SIGINT', onSigint);
  const progress = progressBar(o.runs);
  let result: ProbeResult;
  try {
    const probe = o.mode === 'task' ? await probeTask(o, progress, interrupt.signal) : await probeExec(o, progress, interrupt.signal);
    progress.stop();
    result = toResult(o, probe);
    process.stdout.write(table(o, probe, result));
    if (o.svg !== undefined) {
      const what = o.mode === 'task' ? o.module : o.command;
      write('--svg', o.svg, histogramSvg(probe.runs, `fullstop probe ${what}: ${result.runs} stops, grace ${o.graceMs} ms`));
    }
  } finally {
    progress.stop();
    process.removeListener('SIGINT', onSigint);
  }
  if (o.json !== undefined) write('--json', o.json, JSON.stringify(result, null, 2) + '\n');
  return 0;
}

function write(flag: string, file: string, text: string): void {
  try {
    writeFileSync(file, text);
  } catch (e) {
    throw new UsageError(`${flag}: cannot write ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

/** The table on stdout, ending with the one-line verdict a tool author acts on. */

import { relative } from 'node:path';
import type { ExecProbe } from './exec-probe.js';
import type { ProbeResult } from './result.js';
import { formatMs, percent, percentiles, type Percentiles } from './stats.js';
import type { TaskProbe } from './task-probe.js';
import type { ProbeOptions } from './usage.js';

/** The table of one probe: run time, latencies (all, cooperative, hard), gaps or survivors, verdict. */
export function table(o: ProbeOptions, probe: TaskProbe | ExecProbe, result: ProbeResult): string {
  const lines: string[] = [];
  const row = (label: string, value: string) => lines.push(`  ${label.padEnd(26)}${value}`);
  lines.push(o.mode === 'task' ? `fullstop probe  ${o.module} (export ${JSON.stringify(o.name)})` : `fullstop probe  --exec ${JSON.stringify(o.command)}`);
  row('run time', probe.baselineMs === undefined
    ? `not measured (--span ${formatMs(o.spanMs ?? probe.spanMs)})`
    : `${formatMs(probe.baselineMs)} (one uncancelled run${'baselineExit' in probe && probe.baselineExit !== 0 ? `, exit code ${probe.baselineExit}` : ''})`);
  const threads = o.mode === 'task' ? `, ${o.threads} thread${o.threads === 1 ? '' : 's'}` : '';
  row('runs', `${result.runs} cancelled at random moments over ${formatMs(probe.spanMs)}, grace ${formatMs(o.graceMs)}${threads}`);
  if (probe.unmeasured > 0) {
    const why = o.mode === 'task' ? 'ended before their cancel moment or finished without checking after it' : 'ended before their cancel moment';
    row('', `(${probe.unmeasured} more ${why}: drawn again)`);
  }
  const hardName = o.mode === 'task' ? 'hard stop (worker lost)' : 'SIGKILL needed';
  row(o.mode === 'task' ? 'cancel → settled' : 'SIGTERM → tree gone', spread(result.latencyMs));
  row('  cooperative', `${count(result.cooperative)} (${percent(result.cooperative, result.runs)})  ${spreadOf(probe, false)}`.trimEnd());
  row(`  ${hardName}`, `${count(result.hard)} (${percent(result.hard, result.runs)})  ${spreadOf(probe, true)}`.trimEnd());
  if ('gaps' in probe) {
    const g = probe.gaps;
    row('gap between checks', `median ${formatMs(result.gapMs!.median)}   max ${formatMs(result.gapMs!.max)}   (${g.checks} checks)`);
    if (g.site !== undefined) row('  longest ended at', shortPath(g.site));
  } else {
    row('survivors', probe.survivors.length === 0 ? 'none' : probe.survivors.map((s) => `${s.pid} (${s.command})`).join(', '));
    if (probe.survivors.length > 0) row('', '(killed by the probe after the runs)');
  }
  lines.push(`  verdict: ${verdict(o, probe, result)}`);
  return lines.join('\n') + '\n';
}

function count(runs: number): string {
  return `${String(runs).padStart(4)} run${runs === 1 ? ' ' : 's'}`;
}

function spread(p: Percentiles): string {
  return `p50 ${formatMs(p.p50)}   p90 ${formatMs(p.p90)}   p99 ${formatMs(p.p99)}   max ${formatMs(p.max)}`;
}

function spreadOf(probe: TaskProbe | ExecProbe, hard: boolean): string {
  const values = probe.runs.filter((r) => r.hard === hard).map((r) => r.latencyMs);
  if (values.length === 0) return '';
  const p = percentiles(values);
  return `p50 ${formatMs(p.p50)}   p99 ${formatMs(p.p99)}`;
}

/** One line: how it stops, and what to do about it. */
function shortPath(site: string): string {
  const rel = relative(process.cwd(), site);
  return site.startsWith('/') && !rel.startsWith('..') ? rel : site;
}

export function verdict(o: ProbeOptions, probe: TaskProbe | ExecProbe, r: ProbeResult): string {
  if (r.runs === 0) {
    return `no stop was measured: every run ended by itself before its stop could act (run time ${formatMs(probe.spanMs)}, grace ${formatMs(o.graceMs)}); probe longer work or a smaller --grace`;
  }
  const p99 = `p99 ${formatMs(r.latencyMs.p99)}`;
  if (!('gaps' in probe)) {
    const left = probe.survivors.length === 0 ? 'nothing survived'
      : `${probe.survivors.length} process${probe.survivors.length === 1 ? '' : 'es'} SURVIVED the stop: ${probe.survivors.map((s) => `${s.pid} (${s.command})`).join(', ')}`;
    if (r.hard === 0) return `exits on SIGTERM in ${percent(r.cooperative, r.runs)} of runs, tree gone ${p99}; ${left}`;
    return `needed SIGKILL in ${percent(r.hard, r.runs)} of runs (SIGTERM did not end the tree within the ${formatMs(o.graceMs)} grace), tree gone ${p99}; ${left}`;
  }
  const g = probe.gaps;
  const longest = `longest gap between checks ${formatMs(g.maxMs)}`;
  const site = g.site === undefined || g.site.startsWith('(') ? undefined : shortPath(g.site);
  if (g.checks === 0) {
    return `never checks its token: ${percent(r.hard, r.runs)} of stops needed the hard stop (the worker is lost each time), ${p99}; call checkpoint() in its loops`;
  }
  const ends = site === undefined ? '' : ` (it ends at ${site})`;
  const advice = g.maxMs <= o.graceMs ? ends : site === undefined ? ': add a checkpoint in it' : `: add a checkpoint in the stretch before ${site}`;
  if (r.hard === 0) return `stops cooperatively in ${percent(r.cooperative, r.runs)} of runs, ${p99}; ${longest}${advice}`;
  return `needs the hard stop in ${percent(r.hard, r.runs)} of runs (the worker is lost each time), ${p99}; ${longest}${advice}`;
}

#!/usr/bin/env node
// What the kernel's scheduler does during R1's stops: `node scripts/sched-trace.mjs [--keep DIR]`.
// Needs a build (`npm run build`), Linux `perf` with the sched tracepoints and the right to use them
// (root, or a low perf_event_paranoid). It runs the runner suite (R1–R7, docs/benchmarks.md) once in
// a child under `perf sched record -k mono`, the child logging each of its main thread's
// `Atomics.notify` calls and each stop's phases on the same monotonic clock as the trace; then it
// reads the trace and prints, for each kind of wake main makes, where the woken thread ran and how
// long main lost its CPU inside the call, and main's time in each phase of a stop (on its CPU,
// preempted, asleep). Read with "What the scheduler does with the stop's wake" in docs/benchmarks.md.
// Run it on a quiet machine: the trace is system-wide, and a second busy process changes what it shows.

import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const BUILT = existsSync(join(ROOT, 'dist/bench/runner.bench.js'));
// The bench's own nearest-rank median and quantile, so a figure here reads as a row's does.
const { median, quantile } = BUILT ? await import(pathToFileURL(join(ROOT, 'dist/bench/harness.js')).href) : {};
const PHASES = ['signal', 'settle', 'hardStop', 'history', 'flush'];

/** The child: the runner suite with main's notifies and the stops' phases logged (hrtime, ns). */
async function child(dir) {
  const { suite } = await import(pathToFileURL(join(ROOT, 'dist/bench/runner.bench.js')).href);
  const { TurnRunner } = await import(pathToFileURL(join(ROOT, 'dist/src/index.js')).href);
  const [notifies, stops] = [[], []];
  const notify = Atomics.notify;
  Atomics.notify = function loggedNotify(cells, index, count) {
    const t0 = process.hrtime.bigint();
    const woke = notify.call(Atomics, cells, index, count);
    notifies.push({ t0: String(t0), t1: String(process.hrtime.bigint()), length: cells.length, index, woke });
    return woke;
  };
  const stop = TurnRunner.prototype.stop;
  TurnRunner.prototype.stop = function loggedStop(...args) {
    const t0 = process.hrtime.bigint();
    const report = stop.apply(this, args);
    report.then((r) => r && stops.push({ t0: String(t0), marks: [r.signalledAt, r.settledAt, r.hardStopAt, r.markerAt, r.flushedAt] }), () => {});
    return report;
  };
  const rows = await suite.run({ quick: false, progress: () => {}, wants: () => true });
  writeFileSync(join(dir, 'log.json'), JSON.stringify({ pid: process.pid, notifies, stops,
    rows: rows.map((r) => ({ id: r.id, ratio: r.ratio, fullstop: r.fullstop.median, baseline: r.baseline.median, unit: r.unit })) }));
}

/** What main's notify was for: its cells' length and index tell the three apart in this suite. */
const kindOf = ({ length, index }) => (length === 4 && index === 1 ? 'floor: GO to the plain worker'
  : length === 2 ? 'piscina: a task posted' : 'fullstop: the stopped task\'s slot');

/** The trace's sched_switch and sched_waking events (`perf script -F time,cpu,comm,tid,event,trace`), times in µs. */
export function readTrace(text) {
  const events = [];
  for (const line of text.split('\n')) {
    const m = /^\s*.+?\s+(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+sched:(sched_switch|sched_waking):\s*(.*)$/.exec(line);
    if (m === null) continue;
    const [, tid, cpu, t, kind, f] = m;
    const e = { tid: Number(tid), cpu: Number(cpu), t: Math.round(Number(t) * 1e6), kind };
    if (kind === 'sched_waking') e.wakee = Number(/ pid=(\d+)/.exec(f)[1]);
    else Object.assign(e, { prev: Number(/prev_pid=(\d+)/.exec(f)[1]), state: /prev_state=(\S)/.exec(f)[1], next: Number(/next_pid=(\d+)/.exec(f)[1]) });
    events.push(e);
  }
  return events;
}

const spread = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? 'none' : `${quantile(s, 0.5).toFixed(0)} (p25–p75 ${quantile(s, 0.25).toFixed(0)}–${quantile(s, 0.75).toFixed(0)})`;
};
/** The first index in `0..n` whose item is not before the one sought (`before(i)` is true for a prefix). */
const firstNotBefore = (n, before) => { let [lo, hi] = [0, n]; while (lo < hi) { const mid = (lo + hi) >> 1; if (before(mid)) lo = mid + 1; else hi = mid; } return lo; };

/** The report: `log` as the child writes it (`pid`, `notifies`, `stops`, `rows`), `events` from `readTrace`. */
export function analyse(log, events) {
  const main = log.pid;
  const firstAtOrAfter = (t) => firstNotBefore(events.length, (i) => events[i].t < t);
  const us = (ns) => Number(BigInt(ns) / 1000n);
  const out = [`rows of this run: ${log.rows.filter((r) => /^R[1-3]$/.test(r.id)).map((r) => `${r.id} ${r.ratio.toFixed(3)}× (${r.fullstop.toFixed(r.unit === 'ms' ? 3 : 0)} against ${r.baseline.toFixed(r.unit === 'ms' ? 3 : 0)} ${r.unit})`).join(', ')}`, ''];
  const kinds = new Map();
  for (const n of log.notifies) {
    if (n.woke < 1) continue;
    const [t0, t1] = [us(n.t0), us(n.t1)];
    let k = firstAtOrAfter(t0 - 2);
    while (k < events.length && events[k].t <= t1 + 3 && !(events[k].kind === 'sched_waking' && events[k].tid === main)) k++;
    if (k >= events.length || events[k].t > t1 + 3) continue;
    const wake = events[k];
    // Other threads runnable on main's CPU at the wake: switched out preempted there in the 3 ms
    // before it and not run since.
    const runnable = new Set();
    for (let j = firstAtOrAfter(wake.t - 3000); j < k; j++) {
      const e = events[j];
      if (e.kind !== 'sched_switch') continue;
      runnable.delete(e.next);
      if (e.cpu === wake.cpu && e.state === 'R' && e.prev !== 0 && e.prev !== main) runnable.add(e.prev);
      else runnable.delete(e.prev);
    }
    let [ranOn, wakes, off, outAt] = [undefined, 0, 0, undefined];
    // The call's own window, then up to 5 ms more for the wakee's first run.
    for (let j = k; j < events.length && events[j].t <= (ranOn === undefined ? t1 + 5000 : t1 + 1); j++) {
      const e = events[j];
      if (e.t <= t1 + 1 && e.kind === 'sched_waking' && e.tid === main && e.wakee === wake.wakee) wakes++;
      if (e.kind !== 'sched_switch') continue;
      if (ranOn === undefined && e.next === wake.wakee) ranOn = e.cpu;
      if (e.t > t1 + 1) continue;
      if (e.prev === main) outAt = e.t;
      else if (e.next === main && outAt !== undefined) [off, outAt] = [off + e.t - outAt, undefined];
    }
    const s = kinds.get(kindOf(n)) ?? { calls: 0, onMain: 0, off: [], wakes: [], rule: { busyOther: 0, busyOtherOnMain: 0, idleOnMain: 0, idle: 0 } };
    kinds.set(kindOf(n), s);
    const onMain = ranOn === wake.cpu;
    s.calls++; s.onMain += onMain ? 1 : 0; s.off.push(off); s.wakes.push(wakes);
    if (runnable.size > 0) { s.rule.busyOther++; s.rule.busyOtherOnMain += onMain ? 1 : 0; } else { s.rule.idle++; s.rule.idleOnMain += onMain ? 1 : 0; }
  }
  out.push('main\'s notifies that woke a thread (µs: median, p25–p75):');
  for (const [kind, s] of kinds) {
    out.push(`  ${kind}: ${s.calls} calls; the wakee ran on main's CPU in ${s.onMain}; main off its CPU inside the call ${spread(s.off)}; wakes a call ${median(s.wakes)}`,
      `    another thread runnable on main's CPU at the wake: ${s.rule.busyOther} (the wakee on main's CPU in ${s.rule.busyOtherOnMain}); none: ${s.rule.idle} (on main's CPU in ${s.rule.idleOnMain})`);
  }
  // Main's state over time, then its share of each stop phase.
  const spans = [];
  let since = { t: -Infinity, state: 'on' };
  for (const e of events) {
    if (e.kind !== 'sched_switch' || (e.prev !== main && e.next !== main)) continue;
    const state = e.prev === main ? (e.state === 'R' ? 'preempted' : 'asleep') : 'on';
    spans.push([since.t, e.t, since.state]);
    since = { t: e.t, state };
  }
  spans.push([since.t, Infinity, since.state]);
  const phase = Object.fromEntries(PHASES.map((p) => [p, { length: [], on: [], preempted: [], asleep: [] }]));
  for (const stop of log.stops) {
    const t0 = us(stop.t0);
    const edges = [t0, ...stop.marks.map((ms) => t0 + ms * 1000)];
    PHASES.forEach((p, i) => {
      const [a, b] = [edges[i], edges[i + 1]];
      const sum = { on: 0, preempted: 0, asleep: 0 };
      // Spans are in time order: start at the first that ends after `a`.
      for (let j = firstNotBefore(spans.length, (i) => spans[i][1] <= a); j < spans.length && spans[j][0] < b; j++) {
        const [s, e, state] = spans[j];
        sum[state] += Math.min(e, b) - Math.max(s, a);
      }
      phase[p].length.push(b - a);
      for (const k of Object.keys(sum)) phase[p][k].push(sum[k]);
    });
  }
  out.push('', `main in each phase of a stop (${log.stops.length} stops, µs: median, p25–p75):`);
  for (const p of PHASES) out.push(`  ${p.padEnd(8)} length ${spread(phase[p].length)}; on its CPU ${spread(phase[p].on)}; preempted ${spread(phase[p].preempted)}; asleep ${spread(phase[p].asleep)}`);
  return out.join('\n');
}

async function main(args) {
  if (args[0] === '--child') return child(args[1]);
  const keep = args[0] === '--keep' ? args[1] : undefined;
  if (args.length > 0 && (keep === undefined || args.length !== 2)) {
    process.stderr.write('usage: node scripts/sched-trace.mjs [--keep DIR]   (DIR: where the trace and log are kept)\n');
    return 2;
  }
  if (!BUILT) {
    process.stderr.write('sched-trace: no build in dist/: run `npm run build` first\n');
    return 2;
  }
  const dir = keep ?? mkdtempSync(join(tmpdir(), 'fullstop-sched-'));
  try {
    const perfData = join(dir, 'perf.data');
    const code = await new Promise((resolve, reject) => {
      spawn('perf', ['sched', 'record', '-k', 'mono', '-o', perfData, '--', process.execPath, fileURLToPath(import.meta.url), '--child', dir],
        { stdio: ['ignore', 'inherit', 'inherit'] }).on('error', reject).on('exit', resolve);
    }).catch((error) => { process.stderr.write(`sched-trace: cannot run perf (${error.message}); it needs Linux perf on the PATH\n`); return 2; });
    if (code !== 0 || !existsSync(join(dir, 'log.json'))) {
      process.stderr.write(`sched-trace: the traced run failed (exit ${code})\n`);
      return 1;
    }
    const text = execFileSync('perf', ['script', '-i', perfData, '-F', 'time,cpu,comm,tid,event,trace'], { maxBuffer: 1 << 30, stdio: ['ignore', 'pipe', 'ignore'] }).toString();
    process.stdout.write(analyse(JSON.parse(readFileSync(join(dir, 'log.json'), 'utf8')), readTrace(text)) + '\n');
    return 0;
  } finally {
    if (keep === undefined) rmSync(dir, { recursive: true, force: true });
  }
}

// Only as the CLI, so a test imports the two functions above without tracing anything.
if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) process.exitCode = await main(process.argv.slice(2));

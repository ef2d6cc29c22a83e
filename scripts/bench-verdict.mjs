#!/usr/bin/env node
// Which goals several full runs met: `node scripts/bench-verdict.mjs [--only ID]... RESULTS.json...`.
// Each row of a run states its goal in words (`extra.goal`: "shape ≤ 1.1×", "≤ 1 ms, flat in N", …);
// this reads every clause it can check from the row itself and prints, per run, the goals it
// missed, then per goal how many runs met it and its median over the runs, and the runs that met
// every goal at once. One run's verdict moves with the machine's phase (docs/benchmarks.md, "Full
// runs"), so a goal is best read over several. A clause it cannot check from the row ("flat in N",
// "Redis round trips") is listed as unchecked, never counted as met.

import { existsSync, readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

const HARNESS = join(fileURLToPath(new URL('..', import.meta.url)), 'dist/bench/harness.js');
// The bench's own nearest-rank median and time units, so a figure here reads as a row's does.
const { median, US_PER_UNIT } = existsSync(HARNESS) ? await import(pathToFileURL(HARNESS).href) : {};
const CLAUSE = /^(shape |ratio |median )?(≤|≥) (\d+(?:\.\d+)?)(?:\/(\d+(?:\.\d+)?))?\s*(×|ns|µs|ms|s)?$/;

/**
 * The checkable clauses of a goal text: `{ text, field, op, bound }`, `field` one of `ratio`,
 * `shapeRatio` or `median` (the row's fullstop median, `bound` then in the row's own unit); a
 * clause that is not of that form comes back with `field: undefined`.
 */
export function parseGoal(goal, rowUnit) {
  return goal.split(/,\s*|\s+and\s+/).map((text) => {
    const m = CLAUSE.exec(text.trim());
    if (m === null) return { text, field: undefined };
    const [, subject, op, num, den, unit] = m;
    const value = den === undefined ? Number(num) : Number(num) / Number(den);
    if (unit !== undefined && unit !== '×') {
      if (subject === 'shape ' || subject === 'ratio ' || US_PER_UNIT[rowUnit] === undefined) return { text, field: undefined };
      return { text, field: 'median', op, bound: (value * US_PER_UNIT[unit]) / US_PER_UNIT[rowUnit] };
    }
    if (subject === 'median ') return { text, field: undefined };
    return { text, field: subject === 'shape ' ? 'shapeRatio' : 'ratio', op, bound: value };
  });
}

/** The figure a clause reads from `row`; `undefined` if the row lacks it. */
function figure(row, field) {
  return field === 'median' ? row.fullstop?.median : row[field];
}

/** Every checkable goal of one run: `{ key, id, text, value, met }`, plus the unchecked clauses' texts. */
export function checkRun(results, only = new Set()) {
  const checked = [];
  const unchecked = [];
  for (const row of results) {
    if (typeof row.extra?.goal !== 'string' || (only.size > 0 && !only.has(row.id))) continue;
    for (const clause of parseGoal(row.extra.goal, row.unit)) {
      if (clause.field === undefined) { unchecked.push(`${row.id}: ${clause.text}`); continue; }
      const value = figure(row, clause.field);
      const met = Number.isFinite(value) && (clause.op === '≤' ? value <= clause.bound : value >= clause.bound);
      checked.push({ key: `${row.id} ${clause.text}`, id: row.id, text: clause.text, value, met });
    }
  }
  return { checked, unchecked };
}

const fmt = (x) => (Number.isFinite(x) ? (Math.abs(x) >= 100 ? x.toFixed(0) : x.toPrecision(4)) : String(x));

/** The report's lines for runs `[{ name, results }]`. */
export function verdict(runs, only = new Set()) {
  const lines = [];
  const byGoal = new Map();
  const allMet = [];
  const unchecked = new Set();
  for (const { name, results } of runs) {
    const run = checkRun(results, only);
    for (const text of run.unchecked) unchecked.add(text);
    const missed = run.checked.filter((c) => !c.met);
    for (const c of run.checked) {
      if (byGoal.has(c.key)) byGoal.get(c.key).push(c);
      else byGoal.set(c.key, [c]);
    }
    if (run.checked.length > 0 && missed.length === 0) allMet.push(name);
    lines.push(`${name}: ${missed.length === 0 ? 'every goal met' : `missed ${missed.map((c) => `${c.key} (${fmt(c.value)})`).join(', ')}`}`);
  }
  lines.push('');
  for (const [key, cs] of byGoal) {
    const values = cs.map((c) => c.value).filter(Number.isFinite);
    const figures = values.length === 0 ? 'no figure in any run' : `median ${fmt(median(values))} (${fmt(Math.min(...values))}–${fmt(Math.max(...values))})`;
    lines.push(`${key}: met in ${cs.filter((c) => c.met).length} of ${cs.length}; ${figures}`);
  }
  lines.push('', `every goal at once: ${allMet.length === 0 ? 'in no run' : `in ${allMet.length} of ${runs.length} (${allMet.join(', ')})`}`);
  if (unchecked.size > 0) lines.push(`not checked (not a figure of the row): ${[...unchecked].join('; ')}`);
  return lines;
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  let parsed;
  try {
    parsed = parseArgs({ options: { only: { type: 'string', multiple: true } }, allowPositionals: true });
    if (parsed.positionals.length === 0) throw new TypeError('expected at least one results JSON (node dist/bench/run.js --json FILE)');
    if (median === undefined) throw new Error('no build in dist/: run `npm run build` first');
  } catch (error) {
    process.stderr.write(`bench-verdict: ${error.message}\nusage: node scripts/bench-verdict.mjs [--only ID]... RESULTS.json...\n`);
    process.exit(2);
  }
  const runs = parsed.positionals.map((file) => {
    const doc = JSON.parse(readFileSync(file, 'utf8'));
    if (!Array.isArray(doc?.results)) throw new TypeError(`${file}: expected a results JSON ({ date, node, cpus, results })`);
    return { name: basename(file), results: doc.results };
  });
  process.stdout.write(`${verdict(runs, new Set(parsed.values.only ?? [])).join('\n')}\n`);
}

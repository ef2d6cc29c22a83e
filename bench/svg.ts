/**
 * `--svg`: a grouped horizontal bar chart of the time rows of a results document — per id one
 * fullstop bar and one baseline bar, on a log axis with decade ticks, all in µs.
 *
 * Hand-written (no dependency, no browser): the README embeds the file, so it must be a valid
 * standalone SVG — `xmlns` set, every text escaped, no external fonts or scripts.
 * Log scale because one chart spans ~10 ns (a token check) to ~50 ms (the status quo).
 */

import type { BenchResult } from './harness.js';
import { formatNumber, type ResultsDocument } from './report.js';

/** Microseconds per unit, for the units that are times. */
const MICROSECONDS: Record<string, number> = { ns: 1e-3, 'µs': 1, 'μs': 1, us: 1, ms: 1e3, s: 1e6 };

/** `value` of `unit` in µs, or `undefined` when the unit is not a time. */
export function toMicroseconds(value: number, unit: string): number | undefined {
  const factor = MICROSECONDS[unit];
  return factor === undefined ? undefined : value * factor;
}

/** The rows the chart shows: those whose unit is a time. */
export function timeRows(results: readonly BenchResult[]): BenchResult[] {
  return results.filter((r) => MICROSECONDS[r.unit] !== undefined);
}

export function escapeXml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&${({ '&': 'amp', '<': 'lt', '>': 'gt', '"': 'quot', "'": 'apos' })[c]};`);
}

const WIDTH = 960;
const LEFT = 250; // id + metric labels
const RIGHT = 200; // value labels past the longest bar
const TOP = 84; // title, subtitle, legend
const BOTTOM = 46; // tick labels, axis title
const BAR = 14;
const BAR_GAP = 3;
const GROUP_GAP = 18;
const GROUP = 2 * BAR + BAR_GAP + GROUP_GAP;
const COLOURS = { fullstop: '#1f77b4', baseline: '#b0b0b0' } as const;

interface Scale {
  lo: number;
  hi: number;
  x(us: number): number;
}

/** Whole decades around every positive value, so each bar starts at a labelled tick. */
function logScale(values: readonly number[], plotWidth: number): Scale {
  const positive = values.filter((v) => v > 0);
  let lo = positive.length === 0 ? 0 : Math.floor(Math.log10(Math.min(...positive)));
  let hi = positive.length === 0 ? 1 : Math.ceil(Math.log10(Math.max(...positive)));
  if (hi <= lo) hi = lo + 1;
  return {
    lo,
    hi,
    x: (us) => LEFT + ((Math.log10(Math.max(us, 10 ** lo)) - lo) / (hi - lo)) * plotWidth,
  };
}

function decadeLabel(exponent: number): string {
  return exponent < 0 ? (10 ** exponent).toFixed(-exponent) : (10 ** exponent).toLocaleString('en-US');
}

function text(x: number, y: number, content: string, attrs = ''): string {
  return `<text x="${x.toFixed(1)}" y="${y.toFixed(1)}"${attrs ? ' ' + attrs : ''}>${escapeXml(content)}</text>`;
}

/** The chart as a standalone SVG document. */
export function renderSvg(doc: ResultsDocument): string {
  const rows = timeRows(doc.results);
  const plotWidth = WIDTH - LEFT - RIGHT;
  const plotHeight = Math.max(rows.length, 1) * GROUP;
  const height = TOP + plotHeight + BOTTOM;
  const us = (r: BenchResult, side: 'fullstop' | 'baseline') => toMicroseconds(r[side].median, r.unit)!;
  const scale = logScale(rows.flatMap((r) => [us(r, 'fullstop'), us(r, 'baseline')]), plotWidth);
  const out: string[] = [];

  out.push(`<?xml version="1.0" encoding="UTF-8"?>`);
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" font-family="Helvetica, Arial, sans-serif" font-size="12">`);
  out.push(`<title>${escapeXml(`fullstop vs baseline, median latency (${doc.date}, Node ${doc.node})`)}</title>`);
  out.push(`<rect width="${WIDTH}" height="${height}" fill="#ffffff"/>`);
  const lowerIsBetter = rows.every((r) => r.better === 'lower') ? ' (lower is better)' : '';
  out.push(text(16, 24, `fullstop vs baseline — median latency, log scale${lowerIsBetter}`, 'font-size="16" font-weight="bold"'));
  out.push(text(16, 44, `${doc.date} · Node ${doc.node} · ${doc.cpus} CPUs · same-run medians, all in µs`, 'fill="#555555"'));
  out.push(`<g class="legend">`);
  out.push(`<rect x="16" y="58" width="12" height="12" fill="${COLOURS.fullstop}"/>`, text(34, 68, 'fullstop'));
  out.push(`<rect x="104" y="58" width="12" height="12" fill="${COLOURS.baseline}"/>`, text(122, 68, 'baseline (raw primitive or status quo)'));
  out.push(`</g>`);

  out.push(`<g class="axis">`);
  for (let k = scale.lo; k <= scale.hi; k++) {
    const x = scale.x(10 ** k);
    out.push(`<line class="tick" data-decade="${k}" x1="${x.toFixed(1)}" y1="${TOP - 6}" x2="${x.toFixed(1)}" y2="${TOP + plotHeight}" stroke="#e2e2e2"/>`);
    out.push(text(x, TOP + plotHeight + 16, decadeLabel(k), 'class="tick-label" text-anchor="middle" fill="#555555"'));
  }
  out.push(text(LEFT + plotWidth / 2, TOP + plotHeight + 36, 'µs (log scale)', 'text-anchor="middle" fill="#555555"'));
  out.push(`</g>`);

  if (rows.length === 0) out.push(text(LEFT, TOP + GROUP / 2, 'no time results in this run', 'fill="#555555"'));
  rows.forEach((r, i) => {
    const y = TOP + i * GROUP + GROUP_GAP / 2;
    out.push(`<g class="group" data-id="${escapeXml(r.id)}">`);
    out.push(text(LEFT - 10, y + BAR + 1, r.id, 'text-anchor="end" font-weight="bold"'));
    out.push(text(LEFT - 10, y + 2 * BAR + BAR_GAP, truncate(r.metric, 34), 'text-anchor="end" fill="#555555" font-size="10"'));
    (['fullstop', 'baseline'] as const).forEach((side, s) => {
      const value = us(r, side);
      const top = y + s * (BAR + BAR_GAP);
      const end = scale.x(value);
      const label = `${formatNumber(value)} µs${side === 'baseline' ? ` · ${r.baseline.name}` : ''}`;
      out.push(`<rect class="bar ${side}" data-id="${escapeXml(r.id)}" x="${LEFT}" y="${top.toFixed(1)}" width="${Math.max(end - LEFT, 0.5).toFixed(1)}" height="${BAR}" fill="${COLOURS[side]}"><title>${escapeXml(`${r.id} ${side}: ${label}`)}</title></rect>`);
      out.push(text(end + 6, top + BAR - 3, truncate(label, 30), 'font-size="11"'));
    });
    out.push(`</g>`);
  });

  out.push(`</svg>`);
  return out.join('\n') + '\n';
}

function truncate(s: string, max: number): string {
  const chars = [...s];
  return chars.length <= max ? s : chars.slice(0, max - 1).join('') + '…';
}

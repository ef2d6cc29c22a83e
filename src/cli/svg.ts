/** A small SVG histogram of stop latencies: cooperative stops stacked under hard ones. */

import type { Run } from './runs.js';
import { formatMs } from './stats.js';

const W = 480;
const H = 200;
const PAD = { left: 40, right: 10, top: 36, bottom: 30 };
const BINS = 24;

/** The histogram of `runs`' cancel → settled latencies, titled `title`, as a standalone SVG document. */
export function histogramSvg(runs: readonly Run[], title: string): string {
  const max = Math.max(...runs.map((r) => r.latencyMs), 0.001);
  const width = max / BINS;
  const soft = new Array<number>(BINS).fill(0);
  const hard = new Array<number>(BINS).fill(0);
  for (const r of runs) (r.hard ? hard : soft)[Math.min(BINS - 1, Math.floor(r.latencyMs / width))]!++;
  const top = Math.max(1, ...soft.map((n, i) => n + hard[i]!));
  const plotW = W - PAD.left - PAD.right;
  const plotH = H - PAD.top - PAD.bottom;
  const barW = plotW / BINS;
  const y = (n: number) => PAD.top + plotH - (n / top) * plotH;
  const bars: string[] = [];
  for (let i = 0; i < BINS; i++) {
    const x = (PAD.left + i * barW).toFixed(1);
    const w = Math.max(1, barW - 1).toFixed(1);
    if (soft[i]! > 0) bars.push(`<rect x="${x}" y="${y(soft[i]!).toFixed(1)}" width="${w}" height="${(y(0) - y(soft[i]!)).toFixed(1)}" fill="#2e8b57"><title>${soft[i]} cooperative</title></rect>`);
    if (hard[i]! > 0) bars.push(`<rect x="${x}" y="${y(soft[i]! + hard[i]!).toFixed(1)}" width="${w}" height="${(y(soft[i]!) - y(soft[i]! + hard[i]!)).toFixed(1)}" fill="#c0392b"><title>${hard[i]} hard</title></rect>`);
  }
  const text = (x: number, yy: number, s: string, anchor = 'start') => `<text x="${x}" y="${yy}" font-size="11" text-anchor="${anchor}">${escape(s)}</text>`;
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif">`,
    `<rect width="${W}" height="${H}" fill="#fff"/>`,
    text(PAD.left, 15, title),
    `<line x1="${PAD.left}" y1="${y(0)}" x2="${W - PAD.right}" y2="${y(0)}" stroke="#333"/>`,
    `<line x1="${PAD.left}" y1="${PAD.top}" x2="${PAD.left}" y2="${y(0)}" stroke="#333"/>`,
    ...bars,
    text(PAD.left, H - 12, '0'), text(W - PAD.right, H - 12, formatMs(max), 'end'),
    text(PAD.left + plotW / 2, H - 12, 'cancel → settled', 'middle'),
    text(PAD.left - 4, PAD.top + 8, String(top), 'end'), text(PAD.left - 4, y(0), '0', 'end'),
    `<text x="${W - PAD.right}" y="30" font-size="11" text-anchor="end"><tspan fill="#2e8b57">■</tspan> cooperative <tspan fill="#c0392b">■</tspan> hard</text>`,
    '</svg>',
  ].join('\n') + '\n';
}

function escape(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

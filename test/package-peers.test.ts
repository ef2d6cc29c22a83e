/**
 * The optional peers' ranges in package.json say what is tested: each has an upper bound (a next
 * major is untested until it is), each admits the version the tests pin (devDependencies), and a
 * range whose adapter rests on behaviour seen only on the pinned version starts there.
 */
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';

const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
  peerDependencies: Record<string, string>;
  devDependencies: Record<string, string>;
};

type Version = [number, number, number];

function parse(text: string): Version {
  const match = /^(\d+)\.(\d+)\.(\d+)$/.exec(text.trim());
  if (match === null) throw new Error(`not a plain version: ${text}`);
  return [Number(match[1]), Number(match[2]), Number(match[3])];
}

function compare(a: Version, b: Version): number {
  return a[0] - b[0] || a[1] - b[1] || a[2] - b[2];
}

/** One `||` alternative as [lowest admitted, first refused above]; `undefined` above: no upper bound. */
function bounds(part: string): [Version, Version | undefined] {
  const text = part.trim();
  const caret = /^\^(\d+\.\d+\.\d+)$/.exec(text);
  if (caret !== null) {
    const low = parse(caret[1]);
    return [low, low[0] > 0 ? [low[0] + 1, 0, 0] : [0, low[1] + 1, 0]];
  }
  const range = /^>=\s*(\d+(?:\.\d+){0,2})(?:\s+<\s*(\d+(?:\.\d+){0,2}))?$/.exec(text);
  if (range === null) throw new Error(`a range this spec does not read: ${text}`);
  const full = (v: string) => parse([...v.split('.'), '0', '0'].slice(0, 3).join('.'));
  return [full(range[1]), range[2] === undefined ? undefined : full(range[2])];
}

function admits(range: string, version: Version): boolean {
  return range.split('||').some((part) => {
    const [low, high] = bounds(part);
    return compare(version, low) >= 0 && (high === undefined || compare(version, high) < 0);
  });
}

describe("the optional peers' ranges", () => {
  const peers = Object.entries(pkg.peerDependencies);

  it.each(peers)('%s (%s) has an upper bound', (_name, range) => {
    for (const part of range.split('||')) expect(bounds(part)[1], part).toBeDefined();
  });

  it.each(peers)('%s (%s) admits the version the tests pin', (name, range) => {
    const pinned = pkg.devDependencies[name];
    expect(pinned, `${name} is not pinned in devDependencies`).toBeDefined();
    expect(admits(range, parse(pinned)), `${name}@${pinned}`).toBe(true);
  });

  it('the MCP SDK range starts at the version whose behaviour the adapter rests on (the pinned one)', () => {
    const range = pkg.peerDependencies['@modelcontextprotocol/sdk'];
    const lowest = range.split('||').map((part) => bounds(part)[0]).sort(compare)[0];
    expect(lowest).toEqual(parse(pkg.devDependencies['@modelcontextprotocol/sdk']));
  });
});

#!/usr/bin/env node
// Import-cycle check of the TypeScript sources: `node scripts/check-cycles.mjs [dir ...]`
// (default: src workers, relative to the current directory). Follows relative imports and
// re-exports of .ts/.cts/.mts files (a `.js` specifier names its `.ts` source, as NodeNext wants),
// type-only ones included: a type cycle is still two modules that cannot be read apart. Prints
// each cycle once and exits 1 if there is any, 0 if none, 2 on bad input. Dependency-free on
// purpose (madge does not install next to TypeScript 7), and small enough to read. `npm test`
// runs it through test/imports.test.ts.

import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

const SOURCE = /\.(c|m)?ts$/;
// `import ... from '…'`, `export ... from '…'`, `import '…'`, `import('…')`, `require('…')`;
// comments are stripped first so an example in a comment is not an edge.
const SPECIFIER = /\b(?:import|export)\b[^'"`;]*?\bfrom\s*['"]([^'"]+)['"]|\b(?:import|require)\s*\(?\s*['"]([^'"]+)['"]/g;

/** Every source file under `dir`, recursively (declaration files excluded). */
function sourcesUnder(dir) {
  const out = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...sourcesUnder(path));
    else if (SOURCE.test(name) && !name.endsWith('.d.ts')) out.push(path);
  }
  return out;
}

function stripComments(text) {
  return text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|[^:'"\\])\/\/.*$/gm, '$1');
}

/** The source file a relative specifier names, or undefined when it leaves the sources. */
function resolveSpecifier(from, specifier) {
  const base = resolve(dirname(from), specifier);
  const stem = base.replace(/\.(c|m)?js$/, '');
  const candidates = [base, `${stem}.ts`, `${stem}.cts`, `${stem}.mts`, join(base, 'index.ts')];
  return candidates.find((path) => SOURCE.test(path) && existsSync(path) && statSync(path).isFile());
}

/** Map of file -> the files it imports. */
export function importGraph(dirs) {
  const files = dirs.flatMap((dir) => sourcesUnder(resolve(dir)));
  const graph = new Map();
  for (const file of files) {
    const edges = new Set();
    for (const match of stripComments(readFileSync(file, 'utf8')).matchAll(SPECIFIER)) {
      const specifier = match[1] ?? match[2];
      if (!specifier.startsWith('.')) continue;
      const target = resolveSpecifier(file, specifier);
      if (target !== undefined) edges.add(target);
    }
    graph.set(file, [...edges].sort());
  }
  return graph;
}

/**
 * One cycle per back edge of a depth-first search, each reported once (rotated so that its
 * smallest file comes first). No cycle printed means there is none; every printed one is real,
 * and mending them shows any that were hidden behind them. Enough for a tree that should have none.
 */
export function findCycles(graph) {
  const cycles = new Map();
  const state = new Map(); // file -> 'open' (on the stack) | 'done'
  const stack = [];
  const visit = (file) => {
    state.set(file, 'open');
    stack.push(file);
    for (const next of graph.get(file) ?? []) {
      if (state.get(next) === 'open') {
        const cycle = stack.slice(stack.indexOf(next));
        const start = cycle.indexOf([...cycle].sort()[0]);
        const rotated = [...cycle.slice(start), ...cycle.slice(0, start)];
        cycles.set(rotated.join('\0'), rotated);
      } else if (!state.has(next)) {
        visit(next);
      }
    }
    stack.pop();
    state.set(file, 'done');
  };
  for (const file of [...graph.keys()].sort()) if (!state.has(file)) visit(file);
  return [...cycles.values()];
}

function main(argv) {
  const dirs = argv.length > 0 ? argv : ['src', 'workers'];
  const missing = dirs.filter((dir) => !existsSync(dir) || !statSync(dir).isDirectory());
  if (missing.length > 0) {
    process.stderr.write(`check-cycles: not a directory: ${missing.join(', ')}\n`);
    return 2;
  }
  const graph = importGraph(dirs);
  const cycles = findCycles(graph);
  const name = (file) => relative(process.cwd(), file);
  for (const cycle of cycles) process.stdout.write(`cycle: ${[...cycle, cycle[0]].map(name).join(' -> ')}\n`);
  process.stdout.write(`${graph.size} files, ${cycles.length} import cycle${cycles.length === 1 ? '' : 's'}\n`);
  return cycles.length === 0 ? 0 : 1;
}

if (import.meta.url === `file://${process.argv[1]}` || process.argv[1]?.endsWith('check-cycles.mjs')) {
  process.exitCode = main(process.argv.slice(2));
}

/**
 * `npm run bench`: run every `dist/bench/*.bench.js` that exports `suite`, one after another,
 * print one table and optionally write the JSON and the SVG. The logic is in report.ts; this file
 * only lists, imports, writes and exits. Usage: `USAGE` in report.ts and docs/benchmarks.md.
 *
 * Exit codes: 0 every suite ran; 1 a suite failed (the others still ran, and what they measured
 * is printed and written) or `--only` matched nothing; 2 a bad command line.
 */

import { readdir, writeFile } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { Suite } from './harness.js';
import {
  buildDocument, describeError, formatTable, parseArgs, runSuites, seconds, USAGE, UsageError,
  type CliOptions, type SuiteEntry,
} from './report.js';
import { renderSvg } from './svg.js';

const here = dirname(fileURLToPath(import.meta.url));
const log = (line: string) => process.stderr.write(line + '\n');

async function main(): Promise<number> {
  let options: CliOptions;
  try {
    options = parseArgs(process.argv.slice(2));
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    log(`bench: ${error.message}\n${USAGE}`);
    return 2;
  }
  if (options.help) {
    process.stdout.write(USAGE + '\n');
    return 0;
  }

  const started = performance.now();
  const entries: SuiteEntry[] = (await readdir(here))
    .filter((file) => file.endsWith('.bench.js'))
    .sort()
    .map((file) => ({ stem: basename(file, '.bench.js'), load: () => loadSuite(join(here, file)) }));
  const { results, failures } = await runSuites(entries, options, log);

  if (options.only.length > 0 && results.length === 0 && failures.length === 0) {
    log(`bench: nothing matched --only ${options.only.join(', ')}`);
    return 1;
  }
  const doc = buildDocument(results, { date: new Date().toISOString(), node: process.version, cpus: availableParallelism() });
  process.stdout.write(`\nfullstop benchmarks · ${doc.date} · Node ${doc.node} · ${doc.cpus} CPUs\n\n`);
  process.stdout.write(formatTable(doc.results) + '\n');
  if (options.json !== undefined) await writeFile(options.json, JSON.stringify(doc, null, 2) + '\n');
  if (options.svg !== undefined) await writeFile(options.svg, renderSvg(doc));

  log(`\n${doc.results.length} rows from ${entries.length} suite files in ${seconds(performance.now() - started)}`);
  for (const f of failures) log(`FAILED ${f.suite}: ${describeError(f.error)}`);
  return failures.length === 0 ? 0 : 1;
}

async function loadSuite(path: string): Promise<Suite> {
  const { suite } = (await import(pathToFileURL(path).href)) as { suite?: Partial<Suite> };
  if (suite === undefined || typeof suite.name !== 'string' || typeof suite.run !== 'function') {
    throw new TypeError('expected an export `suite` with a string `name` and a `run` function');
  }
  return suite as Suite;
}

const code = await main();
process.exitCode = code;
// A suite that leaked a worker or a handle would keep the process alive forever: name the leak and
// exit instead. unref'd, so a clean run exits at once and this never fires.
setTimeout(() => {
  const left = process.getActiveResourcesInfo().filter((r) => r !== 'TTYWrap' && r !== 'Timeout');
  log(`bench: a suite left live resources (${left.join(', ') || 'unnamed'}); exiting anyway`);
  process.exit(code === 0 ? 1 : code);
}, 3000).unref();

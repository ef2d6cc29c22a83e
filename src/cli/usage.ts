/**
 * The probe's command line: its flags, their defaults, and the one validation of them. Every
 * mistake is a `UsageError`, which the entry prints as one line and turns into exit code 2.
 */

import { statSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { DEFAULT_GRACE_MS, ErrorCodes } from '../constants.js';
import { MAX_TIMER_MS } from '../errors.js';

/** Bad input: one line for the user, exit code 2, never a stack trace. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
  /** `'ERR_FULLSTOP_USAGE'` */
  readonly code: string = ErrorCodes.usage;
}

/** `fullstop probe --help`. */
export const HELP = `usage:
  fullstop probe <module> [--name N] [--task JSON] [--runs 50] [--grace ${DEFAULT_GRACE_MS}] [--threads 1]
                          [--span MS] [--json FILE] [--svg FILE]
  fullstop probe --exec "<command>" [--runs 20] [--grace ${DEFAULT_GRACE_MS}] [--span MS] [--json FILE] [--svg FILE]

Runs the task (an export of <module>, run in a TurnPool worker) or the shell command once
uncancelled, then --runs times, each cancelled at a random moment over the measured run time
(--span MS instead: skip that run, for work that never ends by itself), and reports how fast
it stopped, how often it needed the hard stop, and (tasks) the longest stretch between two
checks of its token; (commands) any process that survived.`;

/** Flags of both modes. */
interface Common {
  /** Cancelled runs to measure (`--runs`). */
  runs: number;
  /** The grace before the hard stop (`--grace`). */
  graceMs: number;
  /** Cancel moments are drawn over [0, spanMs); `undefined`: measure one uncancelled run first. */
  spanMs: number | undefined;
  /** Where to write the result object; `undefined`: nowhere. */
  json: string | undefined;
  /** Where to write the latency histogram; `undefined`: nowhere. */
  svg: string | undefined;
}
/** `fullstop probe <module> ...`: a task function run in a TurnPool worker. */
export interface TaskProbeOptions extends Common {
  mode: 'task';
  /** Absolute path of the user's module. */
  filename: string;
  /** The module as the user wrote it, for the report. */
  module: string;
  name: string;
  /** The task argument (`--task`, parsed JSON); `undefined` when not given. */
  task: unknown;
  /** Workers, each running one probe run at a time (`--threads`). */
  threads: number;
}
/** `fullstop probe --exec "<command>" ...`: a shell command run through `exec`. */
export interface ExecProbeOptions extends Common {
  mode: 'exec';
  /** Run as `/bin/sh -c command`. */
  command: string;
}
/** Validated flags of one probe. */
export type ProbeOptions = TaskProbeOptions | ExecProbeOptions;

const FLAGS = {
  name: { type: 'string' }, task: { type: 'string' }, runs: { type: 'string' }, grace: { type: 'string' },
  threads: { type: 'string' }, span: { type: 'string' }, json: { type: 'string' }, svg: { type: 'string' },
  exec: { type: 'string' }, help: { type: 'boolean', short: 'h' },
} as const;

/** The options of `fullstop probe ...` (`argv` after `probe`), or `'help'`. */
export function parseProbeArgs(argv: readonly string[]): ProbeOptions | 'help' {
  let parsed;
  try {
    parsed = parseArgs({ args: [...argv], options: FLAGS, allowPositionals: true, strict: true });
  } catch (e) {
    throw new UsageError((e as Error).message.split('\n')[0]!);
  }
  const { values: v, positionals } = parsed;
  if (v.help === true) return 'help';
  if (positionals.length > 1) throw new UsageError(`expected one module, got ${positionals.length}: ${positionals.join(' ')}`);
  const common = (defaultRuns: number): Common => ({
    runs: integer('--runs', v.runs, defaultRuns, 1, 100_000),
    graceMs: ms('--grace', v.grace, DEFAULT_GRACE_MS, 0),
    spanMs: v.span === undefined ? undefined : ms('--span', v.span, 0, Number.MIN_VALUE),
    json: path('--json', v.json),
    svg: path('--svg', v.svg),
  });
  if (v.exec !== undefined) {
    if (positionals.length > 0) throw new UsageError(`give either a module or --exec, not both (got ${positionals[0]} and --exec)`);
    for (const flag of ['name', 'task', 'threads'] as const) {
      if (v[flag] !== undefined) throw new UsageError(`--${flag} applies to a task module, not to --exec`);
    }
    if (v.exec.trim() === '') throw new UsageError('--exec: expected a command, got an empty string');
    return { mode: 'exec', command: v.exec, ...common(20) };
  }
  if (positionals.length === 0) throw new UsageError('expected a task module or --exec "<command>" (fullstop probe --help)');
  const module = positionals[0]!;
  const filename = resolve(module);
  if (!isFile(filename)) throw new UsageError(`no such module: ${module}`);
  if (v.name !== undefined && v.name === '') throw new UsageError('--name: expected an export name, got an empty string');
  return {
    mode: 'task', module, filename, name: v.name ?? 'default', task: taskJson(v.task),
    threads: integer('--threads', v.threads, 1, 1, 64), ...common(50),
  };
}

function integer(flag: string, text: string | undefined, fallback: number, min: number, max: number): number {
  if (text === undefined) return fallback;
  const n = Number(text);
  if (!/^\s*\d+\s*$/.test(text) || n < min || n > max) throw new UsageError(`${flag}: expected a whole number from ${min} to ${max}, got ${JSON.stringify(text)}`);
  return n;
}

function ms(flag: string, text: string | undefined, fallback: number, min: number): number {
  if (text === undefined) return fallback;
  const n = Number(text);
  if (text.trim() === '' || !Number.isFinite(n) || n < min || n > MAX_TIMER_MS) {
    const lower = min === 0 ? '0' : 'above 0';
    throw new UsageError(`${flag}: expected milliseconds, ${lower} to ${MAX_TIMER_MS}, got ${JSON.stringify(text)}`);
  }
  return n;
}

function path(flag: string, text: string | undefined): string | undefined {
  if (text !== undefined && text.trim() === '') throw new UsageError(`${flag}: expected a file name, got an empty string`);
  return text;
}

function taskJson(text: string | undefined): unknown {
  if (text === undefined) return undefined;
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new UsageError(`--task: expected JSON, got ${JSON.stringify(text)} (${(e as Error).message})`);
  }
}

function isFile(filename: string): boolean {
  try {
    return statSync(filename).isFile();
  } catch {
    return false;
  }
}

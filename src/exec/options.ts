/**
 * `ExecOptions` and the one validation of `exec`/`spawnBackground` arguments, done at the boundary
 * before anything is spawned. Messages name the argument and repeat the bad value.
 */

import { DEFAULT_EXEC_MAX_BUFFER, DEFAULT_GRACE_MS } from '../constants.js';
import { checkMs, describe } from '../errors.js';
import { isCancelToken, type CancelToken } from '../token/token.js';
import type { OnOutput } from './output.js';

/**
 * Options of `exec` and `spawnBackground`. Every one is optional.
 *
 * @example
 * await exec('make', ['-j2'], { token, graceMs: 500, timeoutMs: 60_000, cwd: repo, env: { CI: '1' } });
 */
export interface ExecOptions {
  /**
   * The turn's token (or a child of it). Its cancel stops the tree; the child is registered as an
   * owner of the token, so a `TurnRunner` stop awaits it and, after the stop's grace, hard-stops it.
   * A token that is already cancelled or retired spawns nothing: `exec` rejects with `CancelledError`.
   * `spawnBackground` does not bind to it (a background process is not bound to a turn: its stop
   * leaves it running); it only records the turn that started it, so the stop's marker can say one runs.
   * @default activeToken() when no `signal` is given (the turn's token inside a TurnRunner body)
   */
  token?: CancelToken;
  /**
   * Aborting it stops the tree like a token cancel. Already aborted: nothing is spawned and the call
   * rejects with `CancelledError` (`spawnBackground` throws it).
   * @default undefined
   */
  signal?: AbortSignal;
  /**
   * How long a stopped tree gets between SIGTERM and SIGKILL, in ms. The window ends as soon as
   * every process of the tree is gone. Does not apply while a `TurnRunner` stop governs the token:
   * then the stop's own `graceMs` does (docs/design.md §2, "Whose grace").
   * @default 100
   */
  graceMs?: number;
  /** Working directory of the child. @default process.cwd() */
  cwd?: string;
  /** Variables added to (and overriding) `process.env` for the child. @default undefined */
  env?: Record<string, string>;
  /** Written to the child's stdin, which is then closed. Without it stdin is /dev/null. @default undefined */
  input?: string;
  /**
   * Stop the tree this many ms after the spawn, with the same sequence as a cancel; the result then
   * has `timedOut: true`. `0` or `undefined`: no timeout.
   * @default undefined
   */
  timeoutMs?: number;
  /**
   * Most bytes (UTF-8) kept of stdout and of stderr, each, as every output bound counts. Past it the
   * command runs on, and the result keeps the stream's head and tail: its first `ceil(maxBuffer / 2)`
   * bytes, a line `… N bytes omitted …` (N: the bytes written between them), and its last
   * `floor(maxBuffer / 2)` bytes, so both the first error and the last lines are there. An end is
   * never cut inside a character (it keeps up to 3 bytes less). It bounds memory, not the
   * run (`timeoutMs` or a token does that). Capped at the longest string V8 holds
   * (`buffer.constants.MAX_STRING_LENGTH`, less 64).
   * (It counted UTF-16 characters before: see the changelog.)
   * @default 100_000_000
   */
  maxBuffer?: number;
  /**
   * Called with each piece of output as it arrives: `{ stream: 'stdout' | 'stderr', text }`, the
   * text decoded as UTF-8 without ever splitting a character (a character cut between two reads
   * comes whole with the second). Called in arrival order for each stream; never after the call has
   * settled. The result still holds the output. A throw (or a rejected promise) of the callback
   * does not reach the command: it is reported once per stream with `process.emitWarning`
   * (type `'FullstopListenerWarning'`, code `'FULLSTOP_ON_OUTPUT_THREW'`) and the calls go on.
   * @default undefined
   * @example
   * await exec('make', [], { token, onOutput: ({ stream, text }) => ui.append(stream, text) });
   */
  onOutput?: OnOutput;
  /**
   * `'auto'`: the host's containment (`execContainment()`): a cgroup of its own where this host
   * allows it, else the process group on Linux, else tree-kill. `'process-group'` or `'tree-kill'`:
   * that mode for this call, even where a stronger one works (`'tree-kill'` is what hosts without
   * /proc get: the group's SIGTERM, then the child's whole tree killed with tree-kill).
   * `FULLSTOP_CONTAINMENT=process-group` (or `=tree-kill`) in the environment makes `'auto'` mean that.
   * @default 'auto'
   */
  containment?: ContainmentOption;
}

/** The values of `ExecOptions.containment`. */
export type ContainmentOption = 'auto' | 'process-group' | 'tree-kill';
const CONTAINMENT_OPTIONS: readonly ContainmentOption[] = ['auto', 'process-group', 'tree-kill'];

/** Options after validation, defaults applied. */
export interface Checked {
  readonly file: string;
  readonly args: readonly string[];
  readonly token: CancelToken | undefined;
  readonly signal: AbortSignal | undefined;
  readonly graceMs: number;
  readonly timeoutMs: number | undefined;
  readonly maxBuffer: number;
  readonly onOutput: OnOutput | undefined;
  readonly cwd: string | undefined;
  readonly env: Record<string, string> | undefined;
  readonly input: string | undefined;
  readonly containment: ContainmentOption;
}

/** Validate every argument; throws `TypeError`/`RangeError` before anything happens. */
export function check(file: unknown, args: unknown, options: unknown): Checked {
  checkFile(file);
  const argv = checkArgs(args);
  if (options !== undefined && (options === null || typeof options !== 'object')) {
    throw new TypeError(`options: expected an object, got ${describe(options)}`);
  }
  const o = (options ?? {}) as Record<string, unknown>;
  if (o.token !== undefined && !isCancelToken(o.token)) {
    throw new TypeError(`options.token: expected a CancelToken, got ${describe(o.token)}`);
  }
  if (o.signal !== undefined && !(o.signal instanceof AbortSignal)) {
    throw new TypeError(`options.signal: expected an AbortSignal, got ${describe(o.signal)}`);
  }
  checkMs('options.graceMs', o.graceMs);
  checkMs('options.timeoutMs', o.timeoutMs);
  checkMaxBuffer(o.maxBuffer);
  if (o.onOutput !== undefined && typeof o.onOutput !== 'function') {
    throw new TypeError(`options.onOutput: expected a function, got ${describe(o.onOutput)}`);
  }
  checkOptionalString('options.cwd', o.cwd);
  if (typeof o.cwd === 'string' && o.cwd.includes('\0')) throw new TypeError(`options.cwd: expected a path without NUL bytes, got ${describe(o.cwd)}`);
  if (o.containment !== undefined && !CONTAINMENT_OPTIONS.includes(o.containment as ContainmentOption)) {
    throw new TypeError(`options.containment: expected 'auto', 'process-group' or 'tree-kill', got ${describe(o.containment)}`);
  }
  checkOptionalString('options.input', o.input);
  checkEnv(o.env);
  return {
    file, args: argv,
    token: o.token as CancelToken | undefined,
    signal: o.signal as AbortSignal | undefined,
    graceMs: (o.graceMs as number | undefined) ?? DEFAULT_GRACE_MS,
    timeoutMs: o.timeoutMs === 0 ? undefined : (o.timeoutMs as number | undefined),
    maxBuffer: (o.maxBuffer as number | undefined) ?? DEFAULT_EXEC_MAX_BUFFER,
    onOutput: o.onOutput as OnOutput | undefined,
    cwd: o.cwd as string | undefined,
    env: o.env as Record<string, string> | undefined,
    input: o.input as string | undefined,
    containment: (o.containment as ContainmentOption | undefined) ?? 'auto',
  };
}

function checkFile(file: unknown): asserts file is string {
  if (typeof file !== 'string' || file.length === 0 || file.includes('\0')) {
    throw new TypeError(`file: expected a non-empty command string without NUL bytes, got ${describe(file)}`);
  }
}

function checkArgs(args: unknown): readonly string[] {
  if (args === undefined) return [];
  if (!Array.isArray(args)) throw new TypeError(`args: expected an array of strings, got ${describe(args)}`);
  // A plain loop, not forEach: forEach skips the holes of a sparse array, which would then reach
  // the child as the string "undefined".
  for (let i = 0; i < args.length; i++) {
    if (!(i in args)) throw new TypeError(`args[${i}]: expected a string, got a hole (a sparse array)`);
    const arg: unknown = args[i];
    if (typeof arg !== 'string' || arg.includes('\0')) {
      throw new TypeError(`args[${i}]: expected a string without NUL bytes, got ${describe(arg)}`);
    }
  }
  return [...(args as string[])];
}

function checkMaxBuffer(value: unknown): void {
  if (value === undefined) return;
  if (typeof value !== 'number') throw new TypeError(`options.maxBuffer: expected a number of bytes, got ${describe(value)}`);
  if (Number.isNaN(value) || value < 1) {
    throw new RangeError(`options.maxBuffer: expected a number of bytes >= 1, got ${describe(value)}`);
  }
}

function checkOptionalString(name: string, value: unknown): void {
  if (value !== undefined && typeof value !== 'string') {
    throw new TypeError(`${name}: expected a string, got ${describe(value)}`);
  }
}

function checkEnv(env: unknown): void {
  if (env === undefined) return;
  if (env === null || typeof env !== 'object' || Array.isArray(env)) {
    throw new TypeError(`options.env: expected an object of strings, got ${describe(env)}`);
  }
  for (const [key, value] of Object.entries(env)) {
    if (key.includes('\0')) throw new TypeError(`options.env: expected variable names without NUL bytes, got ${describe(key)}`);
    if (typeof value !== 'string' || value.includes('\0')) {
      throw new TypeError(`options.env.${key}: expected a string without NUL bytes, got ${describe(value)}`);
    }
  }
}

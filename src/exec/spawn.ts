/**
 * Spawning through execa: each child detached (leader of its own group), no shell, output read by
 * us (drain.ts) rather than buffered by execa, and every execa termination feature off, because
 * the stop sequence here replaces them (execa's kill reaches only the leader).
 */

import { accessSync, constants, statSync } from 'node:fs';
import { delimiter, isAbsolute, join, resolve } from 'node:path';
import { execa, type Options, type ResultPromise } from 'execa';
import { ToolError } from '../errors.js';
import type { Checked } from './options.js';

export type Subprocess = ResultPromise<Options>;

/** The spawned subprocess, or the `ToolError` of a spawn that failed (ENOENT, EACCES, ...). */
export type Spawned = { subprocess: Subprocess; failure?: undefined } | { subprocess?: undefined; failure: Promise<ToolError> };

export function spawn(o: Checked): Spawned {
  let subprocess: Subprocess;
  try {
    subprocess = execa(o.file, o.args, execaOptions(o));
  } catch (e) {
    return { failure: Promise.resolve(spawnError(o, e)) };
  }
  // execa's promise is never the source of the result (it hangs while an escapee holds a pipe);
  // it is only read for the error of a failed spawn (with `reject: false` it resolves with it).
  const failure = subprocess.then((r: unknown) => r, (e: unknown) => e);
  if (subprocess.pid === undefined) return { failure: failure.then((e) => spawnError(o, e)) };
  subprocess.stdin?.on('error', () => {}); // EPIPE: the child exited before reading `input`
  return { subprocess };
}

function execaOptions(o: Checked): Options {
  return {
    detached: true,
    shell: false,
    cleanup: false,
    buffer: false,
    reject: false,
    stripFinalNewline: false,
    forceKillAfterDelay: false,
    stdout: 'pipe',
    stderr: 'pipe',
    ...(o.input === undefined ? { stdin: 'ignore' as const } : { input: o.input }),
    ...(o.cwd === undefined ? {} : { cwd: o.cwd }),
    ...(o.env === undefined ? {} : { env: o.env }),
  };
}

function spawnError(o: Checked, e: unknown): ToolError {
  const code = (e as { code?: unknown } | null)?.code;
  return failedToSpawn(o, typeof code === 'string' ? code : 'unknown error', e);
}

export function failedToSpawn(o: Checked, code: string, cause?: unknown): ToolError {
  const where = o.cwd === undefined ? '' : ` in ${JSON.stringify(o.cwd)}`;
  return new ToolError(`could not spawn ${JSON.stringify(o.file)}${where}: ${code}`, { cause });
}

/**
 * Why `o.file` cannot be spawned (ENOENT, EACCES), found without spawning: Node reports a failed
 * spawn only on the next tick, and `spawnBackground` must throw synchronously.
 */
export function probeSpawnError(o: Checked): string {
  const cwd = o.cwd ?? process.cwd();
  if (!isDirectory(cwd)) return 'ENOENT';
  const candidates = o.file.includes('/') ? [resolve(cwd, o.file)]
    : (o.env?.PATH ?? process.env.PATH ?? '').split(delimiter).filter(Boolean)
      .map((dir) => join(isAbsolute(dir) ? dir : resolve(cwd, dir), o.file));
  return candidates.some(exists) ? 'EACCES' : 'ENOENT';
}

function isDirectory(path: string): boolean {
  try { return statSync(path).isDirectory(); } catch { return false; }
}

function exists(path: string): boolean {
  try { accessSync(path, constants.F_OK); return true; } catch { return false; }
}

/**
 * Spawning through execa: each child detached (leader of its own group and session), no shell of
 * the caller's, output read by us (drain.ts) rather than buffered by execa, and every execa
 * termination feature off, because the stop sequence here replaces them (execa's kill reaches
 * only the leader). In cgroup mode the child first joins its own cgroup (cgroup.ts).
 */

import { accessSync, constants, statSync, writeFileSync } from 'node:fs';
import { delimiter, isAbsolute, join, resolve } from 'node:path';
import { execa, type Options, type ResultPromise } from 'execa';
import { ToolError } from '../errors.js';
import { CgroupTree, createCgroup, joinScript, removeCgroup } from './cgroup.js';
import { cgroupDirectory } from './containment.js';
import { ProcessGroupTree } from './group.js';
import type { Checked } from './options.js';
import type { Tree } from './tree.js';

export type Subprocess = ResultPromise<Options>;

/** The spawned subprocess and its tree, or the `ToolError` of a spawn that failed (ENOENT, EACCES, ...). */
export type Spawned = { subprocess: Subprocess; tree: Tree; failure?: undefined }
  | { subprocess?: undefined; tree?: undefined; failure: Promise<ToolError> };

export function spawn(o: Checked): Spawned {
  const base = o.containment === 'process-group' ? undefined : cgroupDirectory();
  if (base === undefined) return spawnIn(o, undefined);
  // The command runs through `sh`, whose own "not found" would be an exit code: find out first,
  // so a missing or non-executable command is the same ToolError in both modes.
  const problem = executableProblem(o);
  if (problem !== undefined) return { failure: Promise.resolve(failedToSpawn(o, problem)) };
  let cgroup: string;
  try {
    cgroup = createCgroup(base);
  } catch {
    return spawnIn(o, undefined); // the hierarchy went away since the probe: contain as we can
  }
  const spawned = spawnIn(o, cgroup);
  if (spawned.failure !== undefined) removeCgroup(cgroup);
  return spawned;
}

function spawnIn(o: Checked, cgroup: string | undefined): Spawned {
  let subprocess: Subprocess;
  try {
    subprocess = cgroup === undefined ? execa(o.file, o.args, execaOptions(o))
      : execa('/bin/sh', ['-c', joinScript(cgroup), o.file, ...o.args], execaOptions(o));
  } catch (e) {
    return { failure: Promise.resolve(spawnError(o, e)) };
  }
  // execa's promise is never the source of the result (it hangs while an escapee holds a pipe);
  // it is only read for the error of a failed spawn (with `reject: false` it resolves with it).
  const failure = subprocess.then((r: unknown) => r, (e: unknown) => e);
  if (subprocess.pid === undefined) return { failure: failure.then((e) => spawnError(o, e)) };
  subprocess.stdin?.on('error', () => {}); // EPIPE: the child exited before reading `input`
  if (cgroup === undefined) return { subprocess, tree: new ProcessGroupTree(subprocess.pid) };
  // The child joins by itself before it execs the command; joining it from here as well makes it a
  // member before any stop can run, even if its shell has not been scheduled yet.
  try { writeFileSync(join(cgroup, 'cgroup.procs'), String(subprocess.pid)); } catch { /* exited already */ }
  return { subprocess, tree: new CgroupTree(subprocess.pid, cgroup) };
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
  return executableProblem(o) ?? 'EACCES';
}

/** ENOENT or EACCES as execvp would find them (same PATH, same cwd), or `undefined` when it would run. */
function executableProblem(o: Checked): string | undefined {
  const cwd = o.cwd ?? process.cwd();
  if (!isDirectory(cwd)) return 'ENOENT';
  const candidates = o.file.includes('/') ? [resolve(cwd, o.file)]
    : (o.env?.PATH ?? process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin').split(delimiter).filter(Boolean)
      .map((dir) => join(isAbsolute(dir) ? dir : resolve(cwd, dir), o.file));
  if (candidates.some((path) => !isDirectory(path) && can(path, constants.X_OK))) return undefined;
  return candidates.some((path) => can(path, constants.F_OK)) ? 'EACCES' : 'ENOENT';
}

function isDirectory(path: string): boolean {
  try { return statSync(path).isDirectory(); } catch { return false; }
}

function can(path: string, mode: number): boolean {
  try { accessSync(path, mode); return true; } catch { return false; }
}

/**
 * Spawning with node:child_process: each child detached (leader of its own group and session), no
 * shell of the caller's, output read by us (drain.ts), and no termination feature of anyone else's,
 * because the stop sequence here is the only one. In cgroup mode the child first joins its own
 * cgroup (cgroup.ts). The containment is the host's (containment.ts) unless `options.containment`
 * names one. (Plain `spawn` rather than execa: with every execa feature off, what is left
 * of it is the bookkeeping of its own result promise at the child's exit, which is on the path of a
 * stop, and the env merge and `input`, done below.)
 */

import { spawn as spawnChild, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { accessSync, constants, statSync, writeFileSync } from 'node:fs';
import { delimiter, isAbsolute, join, resolve } from 'node:path';
import { ToolError } from '../errors.js';
import { CgroupTree } from './cgroup.js';
import { cgroupDirectory, execContainment } from './containment.js';
import { createCgroup, joinArgv, removeCgroup } from './hierarchy.js';
import { ProcessGroupTree } from './group.js';
import { killLeader } from './rollback.js';
import type { Checked } from './options.js';
import type { Tree } from './tree.js';
import { TreeKillTree } from './tree-kill.js';

export type Subprocess = ChildProcess;

/** The spawned subprocess and its tree, or the `ToolError` of a spawn that failed (ENOENT, EACCES, ...). */
export type Spawned = { subprocess: Subprocess; tree: Tree; failure?: undefined }
  | { subprocess?: undefined; tree?: undefined; failure: Promise<ToolError> };

export function spawn(o: Checked): Spawned {
  const mode = o.containment === 'auto' ? execContainment() : o.containment;
  if (mode !== 'cgroup') return spawnIn(o, mode);
  const base = cgroupDirectory()!;
  // The command runs through `sh`, whose own "not found" would be an exit code: find out first,
  // so a missing or non-executable command is the same ToolError in both modes.
  const problem = executableProblem(o);
  if (problem !== undefined) return { failure: Promise.resolve(failedToSpawn(o, problem)) };
  let cgroup: string;
  try {
    cgroup = createCgroup(base);
  } catch {
    return spawnIn(o, 'process-group'); // the hierarchy went away since the probe: contain as we can
  }
  const argv = joinArgv(cgroup, o.file, o.args, childEnv(o));
  if (argv === undefined) {
    // The join cannot pass this environment on exactly (joinArgv): contain this one as a process group.
    removeCgroup(cgroup);
    return spawnIn(o, 'process-group');
  }
  const spawned = spawnIn(o, { cgroup, argv });
  if (spawned.failure !== undefined) void spawned.failure.then(() => removeCgroup(cgroup));
  return spawned;
}

/** Spawn in `mode`; for a cgroup, the cgroup made for the child and the argv of the shell that joins it. */
function spawnIn(o: Checked, mode: 'process-group' | 'tree-kill' | { cgroup: string; argv: string[] }): Spawned {
  let subprocess: Subprocess;
  try {
    subprocess = typeof mode === 'string' ? spawnChild(o.file, o.args, spawnOptions(o)) : spawnChild('/bin/sh', mode.argv, spawnOptions(o));
  } catch (e) {
    return { failure: Promise.resolve(spawnError(o, e)) };
  }
  // A failed spawn has no pid and reports its errno in an 'error' event, a tick later.
  if (subprocess.pid === undefined) return { failure: new Promise<unknown>((r) => subprocess.once('error', r)).then((e) => spawnError(o, e)) };
  try {
    subprocess.on('error', () => {}); // a later kill() of ours that fails is not the host's crash
    subprocess.stdin?.on('error', () => {}); // EPIPE: the child exited before reading `input`
    if (o.input !== undefined) subprocess.stdin!.end(o.input);
    if (mode === 'process-group') return { subprocess, tree: new ProcessGroupTree(subprocess.pid) };
    if (mode === 'tree-kill') return { subprocess, tree: new TreeKillTree(subprocess.pid) };
    // The child joins by itself before it execs the command; joining it from here as well makes it a
    // member before any stop can run, even if its shell has not been scheduled yet.
    try { writeFileSync(join(mode.cgroup, 'cgroup.procs'), String(subprocess.pid)); } catch { /* exited already */ }
    return { subprocess, tree: new CgroupTree(subprocess.pid, mode.cgroup) };
  } catch (e) {
    // Spawned, but not ready to be run: it dies before the failure surfaces (rollback.ts).
    return { failure: killLeader(subprocess, typeof mode === 'string' ? undefined : mode.cgroup).then(() => spawnError(o, e)) };
  }
}

function spawnOptions(o: Checked): SpawnOptions {
  return {
    detached: true,
    shell: false,
    windowsHide: true,
    stdio: [o.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
    env: childEnv(o),
    ...(o.cwd === undefined ? {} : { cwd: o.cwd }),
  };
}

/** `env` adds to (and overrides) the host's environment, as documented in options.ts. */
function childEnv(o: Checked): NodeJS.ProcessEnv {
  return o.env === undefined ? process.env : { ...process.env, ...o.env };
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

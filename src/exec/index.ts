/**
 * `exec`: subprocess trees that really die (issue #4). Each child leads its own process group; a
 * stop sends SIGTERM to the group, SIGKILL after the grace window plus a tree-kill sweep of what
 * left it, then drains the pipes with a bound. See docs/exec.md.
 *
 * Files, one termination concern each: group.ts (the tree and every signal sent to it), proc.ts
 * (/proc), grace.ts, sweep.ts, drain.ts, cleanup.ts (host exit), cancel.ts and timeout.ts (causes),
 * child.ts (the stop sequence), spawn.ts (execa), exec.ts and background.ts (the public calls).
 */

export { exec } from './exec.js';
export { spawnBackground, killAllBackground, type BackgroundProcess } from './background.js';
export type { ExecOptions } from './options.js';
export type { ExecResult } from './result.js';

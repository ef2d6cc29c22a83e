/**
 * Children still alive when the host process exits are killed.
 *
 * execa kills its children on exit through signal-exit, but not detached ones (`cleanup` is
 * ignored with `detached: true`), and every fullstop child is detached: it must lead its own
 * group. So this module does it, for foreground and background children alike:
 * - on 'exit', SIGKILL every live group (and recorded escapee) synchronously: an exit handler
 *   cannot await anything;
 * - on SIGINT/SIGTERM, the same, then, only if no other listener of that signal exists, remove
 *   our listeners and re-raise the signal, so the host dies of it exactly as it would have without
 *   us (exit status 128+n). A host with its own handler keeps control: we never exit for it.
 * The listeners are installed with the first live child and removed with the last one, so a host
 * with no child running has none of ours (no listener leak, no changed signal behaviour).
 */

import type { ProcessTree } from './group.js';

const SIGNALS = ['SIGINT', 'SIGTERM'] as const;

/** Trees of children that have not settled yet. */
const live = new Set<ProcessTree>();
let installed = false;

/** Track `tree` until the returned function is called. */
export function track(tree: ProcessTree): () => void {
  live.add(tree);
  install();
  return () => {
    live.delete(tree);
    if (live.size === 0) uninstall();
  };
}

function killAll(): void {
  for (const tree of live) tree.killNow();
}

function onExit(): void {
  killAll();
}

function onSignal(signal: NodeJS.Signals): void {
  killAll();
  if (process.listenerCount(signal) > 1) return; // the host handles it
  uninstall();
  process.kill(process.pid, signal);
}

function install(): void {
  if (installed) return;
  installed = true;
  process.on('exit', onExit);
  for (const signal of SIGNALS) process.on(signal, onSignal);
}

function uninstall(): void {
  if (!installed) return;
  installed = false;
  process.removeListener('exit', onExit);
  for (const signal of SIGNALS) process.removeListener(signal, onSignal);
}

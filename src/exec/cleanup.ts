/**
 * Children still alive when the host process exits are killed.
 *
 * Node kills no child at its exit, and execa's `cleanup` skips detached ones, while every fullstop
 * child is detached: it must lead its own group. So this module does it, for foreground and background children alike, in two ways:
 * - on 'exit' (`process.exit()`, the end of the event loop), SIGKILL every live tree synchronously:
 *   an exit handler cannot await anything;
 * - for deaths without an 'exit' event (SIGKILL, SIGHUP, SIGQUIT, SIGTERM with no handler), the
 *   reaper (reaper.ts) notices that the host is gone and kills what is still registered.
 * No signal handler of ours, ever: a host without one dies of SIGTERM/SIGINT exactly as Node would,
 * and a host with one keeps full control (its background children live on until it really exits).
 * The 'exit' listener is installed with the first live child and removed with the last one.
 */

import type { Tree } from './tree.js';

/** Trees of children that have not settled yet. */
const live = new Set<Tree>();
let installed = false;

/** Track `tree` until the returned function is called (its reaper entry is made at the spawn: spawn.ts). */
export function track(tree: Tree): () => void {
  live.add(tree);
  const untrack = () => {
    if (!live.delete(tree)) return;
    if (live.size === 0 && installed) {
      installed = false;
      process.removeListener('exit', onExit);
    }
  };
  if (!installed) {
    // Undone if it throws (a 'newListener' listener may): tracking is all or nothing.
    try {
      process.on('exit', onExit);
    } catch (e) {
      untrack();
      throw e;
    }
    installed = true;
  }
  return untrack;
}

function onExit(): void {
  for (const tree of live) tree.killNow();
}

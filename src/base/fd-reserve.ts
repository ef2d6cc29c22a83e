/**
 * A descriptor held in reserve, so that a stop can still read /proc when the process has run out of
 * file descriptors (a busy server with every socket in use). While any tree is alive one descriptor
 * (/dev/null) is kept open; a read that fails with EMFILE or ENFILE closes it, reads again through
 * the number it freed, and opens it again. Every read that uses it opens and closes one file,
 * synchronously, so one spare is enough for a whole walk.
 *
 * Not guaranteed: another thread of the process (libuv's pool, a worker) may take the freed number
 * in the µs before the read opens it; the read then fails as it would have without the reserve.
 * (cgroup mode does not depend on this: its hard stop writes through a descriptor kept from the spawn.)
 */

import { closeSync, constants, openSync } from 'node:fs';

/** The spare descriptor; `undefined` while none is held (no tree alive, or it could not be reopened). */
let spare: number | undefined;
/** Trees holding the reserve (`hold`); the spare is closed when the last one releases it. */
let holders = 0;

/** Hold the reserve for one tree, from its spawn; returns the release (idempotent). */
export function holdReserve(): () => void {
  holders++;
  spare ??= openSpare();
  let released = false;
  return () => {
    if (released) return;
    released = true;
    if (--holders === 0 && spare !== undefined) {
      closeSync(spare);
      spare = undefined;
    }
  };
}

/**
 * `read()`, retried once through the reserve when it failed for want of a descriptor. `read` must
 * open at most one file at a time and close it before it returns (readFileSync, readdirSync do).
 */
export function withReserve<T>(read: () => T): T {
  try {
    const value = read();
    if (spare === undefined && holders > 0) spare = openSpare(); // lost earlier: descriptors are back
    return value;
  } catch (e) {
    if (!isOutOfDescriptors(e) || spare === undefined) throw e;
    closeSync(spare);
    spare = undefined;
    try {
      return read();
    } finally {
      spare = holders > 0 ? openSpare() : undefined;
    }
  }
}

/** EMFILE (this process) or ENFILE (the system): what the spare descriptor is kept for. */
function isOutOfDescriptors(e: unknown): boolean {
  const code = (e as { code?: unknown } | null)?.code;
  return code === 'EMFILE' || code === 'ENFILE';
}

function openSpare(): number | undefined {
  try {
    return openSync('/dev/null', constants.O_RDONLY);
  } catch {
    return undefined; // none left even now: the next hold or read tries again
  }
}

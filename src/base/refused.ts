/**
 * Reads the runtime refuses, told apart from "no such file". Deno grants /proc/self (and other
 * processes' /proc files) only to a program run with --allow-all, whatever --allow-read says; Node's
 * permission model (--permission) refuses reads outside --allow-fs-read. Taken for "no such
 * process", such a refusal would silently break exec's identity rule and tree walk; instead the
 * caller degrades as on a host without /proc, and the library says so once, as a process warning
 * of type `RUNTIME_WARNING` (docs/runtimes.md).
 */

/** The `type` of the process warning fullstop emits when the runtime refuses it /proc. */
export const RUNTIME_WARNING = 'FullstopRuntimeWarning';

let warned = false;

/** True for a runtime's refusal (Deno's NotCapable or PermissionDenied, Node's ERR_ACCESS_DENIED). */
export function isRefused(e: unknown): boolean {
  try {
    const { name, code } = e as { name?: unknown; code?: unknown };
    return name === 'NotCapable' || name === 'PermissionDenied' || code === 'ERR_ACCESS_DENIED';
  } catch {
    return false;
  }
}

/** Say once that reading `path` was refused, and what that costs. */
export function warnRefused(path: string, e: unknown): void {
  if (warned) return;
  warned = true;
  try {
    process.emitWarning(
      `fullstop: the runtime refused to read ${path} (${(e as { name?: unknown }).name}): exec cannot walk a child's tree ` +
      `nor prove a pid's identity, so it contains children as on a host without /proc (their process group, and the ` +
      `tree tree-kill finds at the hard stop); on Deno, run with --allow-all (-A). See docs/runtimes.md.`,
      { type: RUNTIME_WARNING, code: 'FULLSTOP_PROC_REFUSED' },
    );
  } catch {
    // Reporting must not become a failure of its own.
  }
}

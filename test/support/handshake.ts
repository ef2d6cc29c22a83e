/**
 * The handshake the pool fixtures (test/fixtures/pool/tasks.mjs) speak: `flags[0]` is set to 1 and
 * notified by the task when it has started; `flags[1]` is its progress counter.
 */

export function flags(): Int32Array {
  return new Int32Array(new SharedArrayBuffer(8));
}

/** Resolves once the task has started (never by sleeping: it waits on flags[0]). */
export async function started(f: Int32Array): Promise<void> {
  const r = Atomics.waitAsync(f, 0, 0, 5000);
  if (r.async) await r.value;
  if (Atomics.load(f, 0) !== 1) throw new Error('task did not start within 5 s');
}

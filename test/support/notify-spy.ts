/**
 * Records every `Atomics.notify` made while `fn` runs (synchronously), with `look(cells, index)`'s
 * answer taken at the moment of each call, then restores the real one. For tests of which slots a
 * cancel wakes, and in what order.
 */
export function notifiesDuring<T = undefined>(fn: () => void, look?: (cells: Int32Array, index: number) => T): { index: number; buffer: ArrayBufferLike; seen: T | undefined }[] {
  const calls: { index: number; buffer: ArrayBufferLike; seen: T | undefined }[] = [];
  const notify = Atomics.notify;
  Atomics.notify = ((cells: Int32Array, index: number, count?: number) => {
    calls.push({ index, buffer: cells.buffer, seen: look?.(cells, index) });
    return notify(cells, index, count);
  }) as typeof Atomics.notify;
  try {
    fn();
  } finally {
    Atomics.notify = notify;
  }
  return calls;
}

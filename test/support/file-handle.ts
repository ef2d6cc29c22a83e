/**
 * The prototype every `FileHandle` shares: a spy on it (`vi.spyOn(proto, 'write')`) sees a
 * Ledger's private handle too. `vi.restoreAllMocks()` puts the real methods back.
 */
import { devNull } from 'node:os';
import { open, type FileHandle } from 'node:fs/promises';

export async function fileHandlePrototype(): Promise<FileHandle> {
  const handle = await open(devNull, 'r');
  await handle.close();
  return Object.getPrototypeOf(handle) as FileHandle;
}

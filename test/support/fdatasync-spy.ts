/**
 * Wraps `fs.fdatasync`, the call a `Ledger` syncs its file with, so a test can see each sync and
 * hold it: `before(fd)` runs first (await it to gate the sync), then the real sync, then
 * `after(fd)`. Returns the vitest spy; `vi.restoreAllMocks()` puts the real one back.
 */

import fs from 'node:fs';
import { vi } from 'vitest';

type Sync = (fd: number, callback: (error: NodeJS.ErrnoException | null) => void) => void;

export function spyOnFdatasync(
  before: (fd: number) => void | Promise<void> = () => {},
  after: (fd: number) => void = () => {},
) {
  const real = fs.fdatasync as Sync;
  return vi.spyOn(fs, 'fdatasync').mockImplementation(((fd: number, callback: (error: NodeJS.ErrnoException | null) => void) => {
    Promise.resolve()
      .then(() => before(fd))
      .then(() => real(fd, (error) => {
        if (error === null) after(fd);
        callback(error);
      }), (error: Error) => callback(error as NodeJS.ErrnoException));
  }) as never);
}

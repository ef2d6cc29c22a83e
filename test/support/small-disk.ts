/**
 * A full disk on demand: a 64 KiB tmpfs mounted inside a test's folder (we run as root; where
 * mount is refused, `mounted` is false and `refused` says why, for the skip message).
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';

export interface SmallDisk {
  readonly mnt: string;
  mounted: boolean;
  readonly refused: string;
}

/** Mount a 64 KiB tmpfs at `<dir>/small`. */
export function mountSmallDisk(dir: string): SmallDisk {
  const mnt = join(dir, 'small');
  mkdirSync(mnt);
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', mnt], { stdio: 'pipe' });
    return { mnt, mounted: true, refused: '' };
  } catch (e) {
    return { mnt, mounted: false, refused: String((e as { stderr?: Buffer }).stderr ?? e).trim() };
  }
}

/** Unmount it (lazily: a handle still open in the test does not block the unmount). */
export function unmountSmallDisk(disk: SmallDisk): void {
  if (disk.mounted) execFileSync('umount', ['-l', disk.mnt]);
  disk.mounted = false;
}

/**
 * The file-system side of the Ledger: writing whole buffers through a handle, keeping a cut tail, and the
 * errors `Ledger.open` gives, which name the path, what failed and — on a full disk — how much room
 * is left and what to free.
 */

import fs from 'node:fs';
import { open as openFile, statfs, type FileHandle } from 'node:fs/promises';
import { dirname } from 'node:path';
import { renderSafely } from '../base/render.js';

/** True for the errors of a full disk or an exhausted quota. */
export function isDiskFull(error: unknown): boolean {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  return code === 'ENOSPC' || code === 'EDQUOT';
}

/** `Ledger.open`'s error: the path, what failed and why; on a full disk, how much room is left and what to free. */
export async function openError(path: string, what: string, cause: unknown): Promise<Error> {
  let root = cause;
  while (root instanceof Error && root.cause !== undefined && (root as NodeJS.ErrnoException).code === undefined) root = root.cause;
  if (!isDiskFull(root)) return new Error(`Ledger.open: ${what}: ${renderSafely(root)}`, { cause });
  const dir = dirname(path);
  const free = await statfs(dir).then((s) => `${s.bavail * s.bsize} bytes`, () => 'an unknown number of bytes');
  return new Error(`Ledger.open: ${what}: the disk is full (${(root as NodeJS.ErrnoException).code}; ` +
    `${free} free on the file system holding "${dir}"). Free space there (delete or move other files; the ledger ` +
    'itself must stay), then open it again: nothing of the ledger was lost', { cause });
}

/** `write` may take less than asked; loop so a batch is never cut short by us. */
export async function writeAll(handle: FileHandle, buffer: Buffer): Promise<void> {
  let offset = 0;
  while (offset < buffer.length) {
    const { bytesWritten } = await handle.write(buffer, offset, buffer.length - offset, null);
    offset += bytesWritten;
  }
}

/**
 * Copies bytes [from, to) of the file open as `handle` to a new file `target` (synced), a chunk at
 * a time: what `Ledger.open` cuts at a hole is kept there, never deleted. A file already there
 * (an earlier cut at the same byte) is kept too: the copy goes to `target.1`, `target.2`, …
 * Returns the path written.
 */
export async function saveCut(handle: FileHandle, from: number, to: number, target: string): Promise<string> {
  let out: FileHandle | undefined;
  for (let n = 0; out === undefined; n++) {
    const path = n === 0 ? target : `${target}.${n}`;
    out = await fs.promises.open(path, 'wx').catch((error: NodeJS.ErrnoException) => {
      if (error.code === 'EEXIST') return undefined;
      throw error;
    });
    if (out !== undefined) target = path;
  }
  try {
    const chunk = Buffer.allocUnsafe(1024 * 1024);
    for (let position = from; position < to;) {
      const { bytesRead } = await handle.read(chunk, 0, Math.min(chunk.length, to - position), position);
      if (bytesRead === 0) break;
      await writeAll(out, chunk.subarray(0, bytesRead));
      position += bytesRead;
    }
    await out.sync();
  } finally {
    await out.close();
  }
  return target;
}

/**
 * `fdatasync(2)` of `fd` through the callback API. A `FileHandle`'s `datasync()` reaches the same
 * call through a promise request and an async function, which cost the main thread measurably more
 * to start when an AsyncLocalStorage is in the process, as a runner's is (docs/benchmarks.md,
 * "Figures behind design choices"); a stop starts two. Called through the `fs` object, so a test can wrap
 * it. The caller keeps the fd open until it settles (`Ledger` waits for its syncs before it closes).
 */
export function fdatasyncFd(fd: number): Promise<void> {
  return new Promise((resolve, reject) => fs.fdatasync(fd, (error) => (error === null ? resolve() : reject(error))));
}

/** Up to `length` bytes at `position` through `handle` (fewer at the end of the file). */
export async function readAt(handle: FileHandle, position: number, length: number): Promise<Buffer> {
  const buffer = Buffer.allocUnsafe(length);
  let offset = 0;
  while (offset < length) {
    const { bytesRead } = await handle.read(buffer, offset, length - offset, position + offset);
    if (bytesRead === 0) break;
    offset += bytesRead;
  }
  return buffer.subarray(0, offset);
}

/** Opens `path` for reading, runs `fn` with its handle and size, closes it; with `fileKey`, refuses another file than that one. */
export async function withFile<T>(path: string, fn: (handle: FileHandle, size: number) => Promise<T>, fileKey?: string): Promise<T> {
  const handle = await openFile(path, 'r');
  try {
    const stat = await handle.stat();
    if (fileKey !== undefined && `${stat.dev}:${stat.ino}` !== fileKey) {
      throw new Error(`Ledger.entries: "${path}" is no longer the file this ledger wrote (it was moved or replaced)`);
    }
    return await fn(handle, stat.size);
  } finally {
    await handle.close();
  }
}

/**
 * A unique fleet prefix per test on the shared Redis, and the removal of that prefix's keys
 * afterwards (never FLUSHDB: other suites use the same server).
 */
import { randomUUID } from 'node:crypto';
import { createClient } from 'redis';

export const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

export function uniquePrefix(what: string): string {
  return `fullstop-test-${what}-${randomUUID().slice(0, 8)}`;
}

/** The keys under `prefix` (the fleet's records, leases and finished turns). */
export async function keysOf(prefix: string): Promise<string[]> {
  const client = createClient({ url: REDIS_URL });
  await client.connect();
  try {
    const keys: string[] = [];
    for await (const batch of client.scanIterator({ MATCH: `${prefix}*`, COUNT: 100 })) keys.push(...batch);
    return keys;
  } finally {
    client.destroy();
  }
}

export async function removeKeys(prefix: string): Promise<void> {
  const keys = await keysOf(prefix);
  if (keys.length === 0) return;
  const client = createClient({ url: REDIS_URL });
  await client.connect();
  try {
    await client.del(keys);
  } finally {
    client.destroy();
  }
}

/**
 * The part of a node-redis client (`redis` 5 or 6, `createClient()`) the fleet uses, as a
 * structural type: nothing here imports `redis` at run time, so `fullstop` works without it and
 * the fleet only ever uses the client its caller gave it (and one `duplicate()` of it).
 */
import { describe } from '../errors.js';

/** A reply listener of `subscribe`. */
export type FleetMessageListener = (message: string, channel: string) => void;

/** What the fleet needs of a node-redis client; a `RedisClientType` from `createClient()` fits. */
export interface FleetRedisClient {
  readonly isOpen: boolean;
  readonly isReady: boolean;
  connect(): Promise<unknown>;
  duplicate(overrides?: { name?: string }): FleetRedisClient;
  sendCommand(args: string[], options?: { timeout?: number }): Promise<unknown>;
  subscribe(channel: string, listener: FleetMessageListener): Promise<unknown>;
  unsubscribe(channel?: string, listener?: FleetMessageListener): Promise<unknown>;
  destroy(): void;
  on(event: string, listener: (...args: any[]) => void): unknown;
  off(event: string, listener: (...args: any[]) => void): unknown;
}

/** `value` must look like a node-redis client (checked once, at `Fleet.start`). */
export function checkRedisClient(name: string, value: unknown): asserts value is FleetRedisClient {
  const c = value as Record<string, unknown> | null;
  const ok = c !== null && typeof c === 'object' &&
    ['connect', 'duplicate', 'sendCommand', 'subscribe', 'unsubscribe', 'destroy', 'on', 'off'].every((m) => typeof c[m] === 'function');
  if (!ok) throw new TypeError(`${name}: expected a node-redis client (createClient() of 'redis'), got ${describe(value)}`);
}

/**
 * Start connecting `client` if nobody has: node-redis keeps retrying by its own reconnect
 * strategy, so this never waits for Redis (a fleet must start while Redis is down).
 */
export function ensureConnecting(client: FleetRedisClient): void {
  if (client.isOpen) return;
  client.connect().catch(() => { /* reported through the client's 'error' events; it retries */ });
}

/** A Redis reply did not come within the fleet's bound. */
class RedisTimeoutError extends Error {
  override readonly name = 'RedisTimeoutError';
}

/**
 * Send one command and wait at most `ms` for its reply. node-redis's own `timeout` option only
 * covers the wait *before* a command is written; a connection that stops answering after the write
 * (a partition, a frozen server) would keep the caller waiting until the socket dies. The command
 * itself stays queued in the client until then; only the wait ends here.
 */
export function command(client: FleetRedisClient, args: string[], ms: number): Promise<unknown> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    client.sendCommand(args, { timeout: ms }),
    new Promise<never>((_, reject) => { timer = setTimeout(() => reject(new RedisTimeoutError(`no reply from Redis within ${ms} ms`)), ms); }),
  ]).finally(() => clearTimeout(timer));
}

/**
 * The part of a node-redis client the fleet uses, as structural types: a single-node client
 * (`createClient()` of `redis` 5 or 6) or a cluster client (`createCluster()`). Nothing here
 * imports `redis` at run time, so `fullstop` works without it and the fleet only ever uses the
 * client its caller gave it (and one `duplicate()` of it, its subscriber).
 *
 * The two kinds differ in `sendCommand` (a cluster routes by the command's first key) and in
 * `duplicate` (a cluster's connections cannot be named); `command` and `duplicateSubscriber` are
 * the one place that knows.
 */
import { ErrorCodes } from '../constants.js';
import { describe } from '../errors.js';
import { within } from '../base/within.js';

/** A reply listener of `subscribe`. */
export type FleetMessageListener = (message: string, channel: string) => void;

/** What the fleet needs of either kind of client. */
interface FleetClientBase {
  readonly isOpen: boolean;
  readonly isReady: boolean;
  connect(): Promise<unknown>;
  subscribe(channel: string, listener: FleetMessageListener): Promise<unknown>;
  unsubscribe(channel?: string): Promise<unknown>;
  destroy(): void;
  on(event: string, listener: (...args: any[]) => void): unknown;
  off(event: string, listener: (...args: any[]) => void): unknown;
}

/** A single-node client: a `RedisClientType` from `createClient()` fits. */
export interface FleetSingleClient extends FleetClientBase {
  duplicate(overrides?: { name?: string }): FleetSingleClient;
  sendCommand(args: string[], options?: { timeout?: number }): Promise<unknown>;
}

/** A Redis Cluster client: a `RedisClusterType` from `createCluster()` fits. */
export interface FleetClusterClient extends FleetClientBase {
  /** The cluster's masters (how a cluster client is told from a single-node one). */
  readonly masters: readonly unknown[];
  duplicate(overrides?: { minimizeConnections?: boolean }): FleetClusterClient;
  sendCommand(firstKey: string | undefined, isReadonly: boolean | undefined, args: string[], options?: { timeout?: number }): Promise<unknown>;
}

/** What `Fleet.start({ redis })` takes: a node-redis client, single-node or cluster. */
export type FleetRedisClient = FleetSingleClient | FleetClusterClient;

/** True for a `createCluster()` client. */
export function isCluster(client: FleetRedisClient): client is FleetClusterClient {
  return Array.isArray((client as { masters?: unknown }).masters) && typeof (client as { nodeClient?: unknown }).nodeClient === 'function';
}

/** `value` must look like a node-redis client (checked once, at `Fleet.start`). */
export function checkRedisClient(name: string, value: unknown): asserts value is FleetRedisClient {
  const c = value as Record<string, unknown> | null;
  const ok = c !== null && typeof c === 'object' &&
    ['connect', 'duplicate', 'sendCommand', 'subscribe', 'unsubscribe', 'destroy', 'on', 'off'].every((m) => typeof c[m] === 'function');
  if (!ok) throw new TypeError(`${name}: expected a node-redis client (createClient() or createCluster() of 'redis'), got ${describe(value)}`);
}

/**
 * The subscriber's connection: a duplicate of the caller's client. A single-node one is named
 * `name` (to find it in `CLIENT LIST`); a cluster one keeps no connection but its pub/sub node's
 * and the discovery's (`minimizeConnections`), and node-redis moves its subscriptions to another
 * node when the topology changes (a failover).
 */
export function duplicateSubscriber(client: FleetRedisClient, name: string): FleetRedisClient {
  return isCluster(client) ? client.duplicate({ minimizeConnections: true }) : client.duplicate({ name });
}

/** How long a cluster client waits between two `connect()` attempts while no root node answers. */
const CLUSTER_RECONNECT_MS = 1000;

/**
 * Start connecting `client` if nobody has, and keep trying: a single-node client retries by its
 * own reconnect strategy, while a cluster client's `connect()` gives up when no root node answers,
 * so it is called again every second until it is open or `stopped()` (a fleet must start, and
 * come back, while Redis is down).
 */
export function ensureConnecting(client: FleetRedisClient, stopped: () => boolean = () => false): Promise<unknown> {
  if (client.isOpen) return Promise.resolve();
  const attempt = (): Promise<unknown> => client.connect().catch(async (error: unknown) => {
    if (!isCluster(client) || stopped()) throw error;
    await new Promise((resolve) => setTimeout(resolve, CLUSTER_RECONNECT_MS).unref());
    if (stopped()) throw error;
    return client.isOpen ? undefined : attempt();
  });
  const connecting = attempt();
  connecting.catch(() => { /* reported through the client's 'error' events */ });
  return connecting;
}

/** A Redis reply did not come within the fleet's bound. */
class RedisTimeoutError extends Error {
  override readonly name = 'RedisTimeoutError';
  /** `'ERR_FULLSTOP_FLEET_UNAVAILABLE'`: a reply that did not come is Redis out of reach. */
  readonly code: string = ErrorCodes.fleetUnavailable;
}

/**
 * Send one command and wait at most `ms` for its reply. `key` is the command's first key (a
 * cluster client sends the command to the master of its slot; undefined: any node). node-redis's
 * own `timeout` option only covers the wait *before* a command is written; a connection that stops
 * answering after the write (a partition, a frozen server, a master killed mid-failover) would
 * keep the caller waiting until the socket dies. The command itself stays queued in the client
 * until then; only the wait ends here.
 */
export function command(client: FleetRedisClient, key: string | undefined, args: string[], ms: number): Promise<unknown> {
  ms = Math.max(1, Math.ceil(ms)); // node-redis's timeout must be an integer
  const sent = isCluster(client) ? client.sendCommand(key, false, args, { timeout: ms }) : client.sendCommand(args, { timeout: ms });
  return within(sent, ms, () => { throw new RedisTimeoutError(`no reply from Redis within ${ms} ms`); });
}

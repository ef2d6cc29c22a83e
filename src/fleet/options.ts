/**
 * `Fleet.start`'s and `Fleet.stop`'s options: each documented once with its default, checked once at the boundary.
 */
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import {
  DEFAULT_FLEET_CALL_TIMEOUT_MS, DEFAULT_FLEET_COMMAND_TIMEOUT_MS, DEFAULT_FLEET_FINISHED_TTL_MS, DEFAULT_FLEET_LEASE_MS,
  DEFAULT_FLEET_MAX_PENDING_STOPS, DEFAULT_FLEET_PREFIX, DEFAULT_MAX_ANSWER_BYTES, DEFAULT_PENDING_STOP_MS, StopReasons,
} from '../constants.js';
import { checkId, checkMs, describe } from '../errors.js';
import { asJson, jsonText } from '../base/json.js';
import { utf8Bytes } from '../base/head-tail.js';
import { TurnRunner } from '../turn/runner.js';
import { checkSignalReason } from '../turn/runner-options.js';
import { checkRedisClient, type FleetRedisClient } from './client.js';
import { checkWellFormed } from './wire-id.js';

export interface FleetOptions {
  /**
   * A node-redis client, connected or not: `createClient()` of `redis` for one Redis, or
   * `createCluster()` for Redis Cluster (7 or later). The caller owns it and its connection
   * options (reconnect strategy, TLS, auth; for a cluster, `topologyRefreshOnReconnectionAttemptStrategy`
   * sets how soon a failover is noticed); the fleet never closes it and `duplicate()`s it once
   * for its subscriber.
   */
  redis: FleetRedisClient;
  /** This instance's runner: its fleet turns are registered, renewed and stopped through it. */
  runner: TurnRunner;
  /**
   * This instance's name in Redis; unique among live instances (no spaces or newlines).
   * @default `${hostname}:${pid}:${random}`
   */
  nodeId?: string;
  /** Prefix of every key and channel. @default 'fullstop' */
  prefix?: string;
  /** How long a turn stays owned without a renewal. @default 15000 */
  leaseMs?: number;
  /** How often the owner renews its turns' leases (and reads their pending stops). @default leaseMs / 3 */
  renewMs?: number;
  /** How often this instance reaps expired leases (any instance's turns). @default leaseMs / 3 */
  sweepMs?: number;
  /** How long a finished turn's record answers `already_finished`. @default 86400000 (24 h) */
  finishedTtlMs?: number;
  /**
   * What `run` does when Redis cannot be reached: `'refuse'` rejects with
   * `FleetUnavailableError`; `'local'` runs the turn unregistered (`unregistered: true`): only a
   * local `runner.stop` reaches it. @default 'refuse'
   */
  onUnavailable?: 'refuse' | 'local';
  /** Longest wait for a Redis reply when registering or recording a turn. @default 2000 */
  commandTimeoutMs?: number;
  /**
   * How long a stop of a turn id no instance has registered yet (`stop(sessionId, { turnId })`,
   * answered `pending`) is kept for that turn's `run`. @default 60000
   */
  pendingStopMs?: number;
  /**
   * The most pending stops (stops of turn ids no instance has registered yet) Redis keeps for one
   * session. Past it a stop of another unregistered turn id is not kept and answers
   * `{ outcome: 'refused', why: 'session_full' }`; expired ones are pruned first, and other sessions are never
   * affected. @default 100
   */
  maxPendingStops?: number;
  /**
   * The most UTF-8 bytes of JSON one `answer` may send (its answer as JSON). A larger answer is
   * refused with a `RangeError` naming `answer` before anything reaches Redis: the question stays
   * open. Redis runs each of an answer's scripts whole, so an answer of many megabytes stalls it
   * for every instance. @default 1048576 (1 MiB)
   */
  maxAnswerBytes?: number;
}

/** Options of `Fleet.run`. */
export interface FleetRunOptions {
  /** The turn's id, used once fleet-wide. @default `turn-${randomUUID()}` */
  turnId?: string;
  /** The user's message, recorded on `turn_started` (the runner's `RunOptions.input`; JSON). */
  input?: unknown;
  /**
   * A caller's signal (a request's, a job's): its abort stops the turn under the runner's grace,
   * with reason `signalReason`, as `runner.stop` would; the signal's own reason is kept as the
   * stop's `detail` (the runner's `RunOptions.signal`).
   */
  signal?: AbortSignal;
  /**
   * The reason code of the stop `signal`'s abort makes; only with `signal` (the runner's
   * `RunOptions.signalReason`). @default 'cancel.client'
   */
  signalReason?: string;
}

/** `Fleet.run`'s options checked (before anything reaches Redis), as the runner's `RunOptions` minus the turn id. */
export function resolveRunOptions(options: FleetRunOptions): { turnId: string | undefined; runOptions: { input?: unknown; signal?: AbortSignal; signalReason?: string } } {
  if (options === null || typeof options !== 'object') throw new TypeError(`options: expected an object, got ${describe(options)}`);
  const { turnId, input, signal, signalReason } = options;
  if (turnId !== undefined) checkId('options.turnId', turnId);
  if (signal !== undefined && !(signal instanceof AbortSignal)) throw new TypeError(`options.signal: expected an AbortSignal, got ${describe(signal)}`);
  // Checked here: the runner would refuse it only after the registration.
  const reason = checkSignalReason(signal, signalReason);
  // The reason goes into the turn's Redis record: well-formed, as a stop's reason (wire-id.ts).
  if (reason.signalReason !== undefined) checkWellFormed('options.signalReason', reason.signalReason);
  const json = input === undefined ? undefined : asJson('options.input', input);
  return { turnId, runOptions: { ...(json === undefined ? {} : { input: json }), ...(signal === undefined ? {} : { signal, ...reason }) } };
}

/** Options of `Fleet.stop`. */
export interface FleetStopOptions {
  /** Stop this turn only (fenced by its epoch); without it, the session's turn running when the stop is recorded. */
  turnId?: string;
  /** Reason code passed to the owner's `runner.stop`. @default 'cancel.user' */
  reason?: string;
  /** Grace the owner gives the turn's owners. @default the owner runner's graceMs */
  graceMs?: number;
  /** Wait for the owner's acknowledgement (its StopReport). @default true */
  wait?: boolean;
  /** Bound on the whole call: Redis reply plus the acknowledgement. @default 2000 */
  timeoutMs?: number;
}

/** Options of `Fleet.answer`. */
export interface FleetAnswerOptions {
  /** Bound on the whole call: Redis's reply plus the owner's confirmation. @default 2000 */
  timeoutMs?: number;
}

/** `answer` as the JSON `Fleet.answer` sends (`undefined` as `null`), at most `maxBytes` bytes of UTF-8. */
export function answerJson(answer: unknown, maxBytes: number): string {
  const json = jsonText('answer', answer) ?? 'null';
  // JSON.stringify escapes lone surrogates, so the text is well-formed and this is the bytes sent.
  const bytes = utf8Bytes(json);
  if (bytes > maxBytes) throw new RangeError(`answer: at most ${maxBytes} bytes of JSON (maxAnswerBytes), got ${bytes}`);
  return json;
}

/** `Fleet.answer`'s options checked, with their defaults. */
export function resolveAnswerOptions(options: FleetAnswerOptions): { timeoutMs: number } {
  if (options === null || typeof options !== 'object') throw new TypeError(`options: expected an object, got ${describe(options)}`);
  const { timeoutMs = DEFAULT_FLEET_CALL_TIMEOUT_MS } = options;
  checkMs('options.timeoutMs', timeoutMs);
  return { timeoutMs };
}

/** `Fleet.stop`'s options checked, with their defaults. */
export function resolveStopOptions(options: FleetStopOptions): FleetStopOptions & { reason: string; wait: boolean; timeoutMs: number } {
  if (options === null || typeof options !== 'object') throw new TypeError(`options: expected an object, got ${describe(options)}`);
  const { turnId, reason = StopReasons.user, graceMs, wait = true, timeoutMs = DEFAULT_FLEET_CALL_TIMEOUT_MS } = options;
  if (turnId !== undefined) checkId('options.turnId', turnId);
  checkId('options.reason', reason);
  checkWellFormed('options.reason', reason);
  checkMs('options.graceMs', graceMs);
  if (typeof wait !== 'boolean') throw new TypeError(`options.wait: expected a boolean, got ${describe(wait)}`);
  checkMs('options.timeoutMs', timeoutMs);
  return { turnId, reason, graceMs, wait, timeoutMs };
}

export interface ResolvedFleetOptions {
  redis: FleetRedisClient; runner: TurnRunner; nodeId: string; prefix: string; leaseMs: number;
  renewMs: number; sweepMs: number; finishedTtlMs: number; onUnavailable: 'refuse' | 'local';
  commandTimeoutMs: number; pendingStopMs: number; maxPendingStops: number; maxAnswerBytes: number;
}

function checkPositive(name: string, value: number | undefined): void {
  checkMs(name, value);
  if (value === 0) throw new RangeError(`${name}: expected more than 0 ms, got 0`);
}

/** A node's name and the prefix, checked (shared by `Fleet.start` and `Fleet.connect`). */
function checkNaming(nodeId: unknown, prefix: unknown): asserts nodeId is string {
  checkId('options.nodeId', nodeId);
  checkWellFormed('options.nodeId', nodeId);
  if (/\s/.test(nodeId)) throw new TypeError(`options.nodeId: expected no whitespace (it names a connection), got ${describe(nodeId)}`);
  checkId('options.prefix', prefix);
  checkWellFormed('options.prefix', prefix);
}

/** The default `nodeId`: `${hostname}:${pid}:${random}`, after `kind:` when given. */
function defaultNodeId(kind = ''): string {
  return `${kind}${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
}

export function resolveFleetOptions(options: FleetOptions): ResolvedFleetOptions {
  if (options === null || typeof options !== 'object') throw new TypeError(`options: expected an object, got ${describe(options)}`);
  checkRedisClient('options.redis', options.redis);
  if (!(options.runner instanceof TurnRunner)) throw new TypeError(`options.runner: expected a TurnRunner, got ${describe(options.runner)}`);
  const { nodeId = defaultNodeId(), prefix = DEFAULT_FLEET_PREFIX } = options;
  checkNaming(nodeId, prefix);
  const leaseMs = options.leaseMs ?? DEFAULT_FLEET_LEASE_MS;
  checkPositive('options.leaseMs', leaseMs);
  const { renewMs = leaseMs / 3, sweepMs = leaseMs / 3 } = options;
  checkPositive('options.renewMs', renewMs);
  if (renewMs >= leaseMs) throw new RangeError(`options.renewMs: expected less than leaseMs (${leaseMs}), got ${renewMs}`);
  checkPositive('options.sweepMs', sweepMs);
  const shared = resolveShared(options);
  const onUnavailable = options.onUnavailable ?? 'refuse';
  if (onUnavailable !== 'refuse' && onUnavailable !== 'local') {
    throw new TypeError(`options.onUnavailable: expected 'refuse' or 'local', got ${describe(onUnavailable)}`);
  }
  return { redis: options.redis, runner: options.runner, nodeId, prefix, leaseMs, renewMs, sweepMs, onUnavailable, ...shared };
}

/** The options a stop or an answer uses, the same for `Fleet.start` and `Fleet.connect`, checked, with their defaults. */
function resolveShared(options: FleetClientOptions): Pick<ResolvedFleetOptions, 'finishedTtlMs' | 'commandTimeoutMs' | 'pendingStopMs' | 'maxPendingStops' | 'maxAnswerBytes'> {
  const { finishedTtlMs = DEFAULT_FLEET_FINISHED_TTL_MS, commandTimeoutMs = DEFAULT_FLEET_COMMAND_TIMEOUT_MS, pendingStopMs = DEFAULT_PENDING_STOP_MS } = options;
  checkPositive('options.finishedTtlMs', finishedTtlMs);
  checkPositive('options.commandTimeoutMs', commandTimeoutMs);
  checkPositive('options.pendingStopMs', pendingStopMs);
  const { maxPendingStops = DEFAULT_FLEET_MAX_PENDING_STOPS } = options;
  if (!Number.isSafeInteger(maxPendingStops) || maxPendingStops < 1) {
    throw new RangeError(`options.maxPendingStops: expected a positive integer, got ${describe(maxPendingStops)}`);
  }
  const { maxAnswerBytes = DEFAULT_MAX_ANSWER_BYTES } = options;
  if (!Number.isSafeInteger(maxAnswerBytes) || maxAnswerBytes < 1) {
    throw new RangeError(`options.maxAnswerBytes: expected a positive integer, got ${describe(maxAnswerBytes)}`);
  }
  return { finishedTtlMs: Math.round(finishedTtlMs), commandTimeoutMs, pendingStopMs: Math.ceil(pendingStopMs), maxPendingStops, maxAnswerBytes };
}

/**
 * `Fleet.connect`'s options: a stop-only client's. The fleet-wide ones (`prefix`,
 * `finishedTtlMs`, `pendingStopMs`, `maxPendingStops`, `maxAnswerBytes`) must be the instances'
 * (`Fleet.start`'s) values; each has the same default.
 */
export interface FleetClientOptions extends Pick<FleetOptions,
  'redis' | 'prefix' | 'finishedTtlMs' | 'commandTimeoutMs' | 'pendingStopMs' | 'maxPendingStops' | 'maxAnswerBytes'> {
  /**
   * This client's name in Redis: the owners' acknowledgements come to its channel; unique among
   * live instances and clients (no spaces or newlines).
   * @default `client:${hostname}:${pid}:${random}`
   */
  nodeId?: string;
}

export type ResolvedClientOptions = Pick<ResolvedFleetOptions,
  'redis' | 'nodeId' | 'prefix' | 'finishedTtlMs' | 'commandTimeoutMs' | 'pendingStopMs' | 'maxPendingStops' | 'maxAnswerBytes'>;

export function resolveClientOptions(options: FleetClientOptions): ResolvedClientOptions {
  if (options === null || typeof options !== 'object') throw new TypeError(`options: expected an object, got ${describe(options)}`);
  checkRedisClient('options.redis', options.redis);
  if ('runner' in options) throw new TypeError('options.runner: a stop-only client runs no turns; start a Fleet (Fleet.start) to run them');
  const { nodeId = defaultNodeId('client:'), prefix = DEFAULT_FLEET_PREFIX } = options;
  checkNaming(nodeId, prefix);
  return { redis: options.redis, nodeId, prefix, ...resolveShared(options) };
}

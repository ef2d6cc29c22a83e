/**
 * Every Redis key and channel name of the fleet, built here from one prefix (and nowhere else).
 *
 * A session's keys share the hash tag `{sessionId}`, so every script, which touches the keys of
 * one session only, runs unchanged on Redis Cluster (all of its keys hash to one slot). The lease
 * index is the one key outside any session: no script touches it; it is only a hint for the sweep
 * (see docs/fleet.md, "Key schema"). A question and a turn id's claim each have the hash tag of
 * their own id, and their scripts touch that one key.
 */
import { toWire } from './wire-id.js';

export interface FleetKeys {
  /** Hash of one session: `latest` (turn id), `epoch` (counter), `t:<turnId>` (JSON turn record). */
  turns(sessionId: string): string;
  /** Sorted set of one session's finished turn ids by finish time (server ms), for pruning. */
  finished(sessionId: string): string;
  /** Hash of one session's pending stops: turn id → JSON stop, for turns not registered yet. */
  pending(sessionId: string): string;
  /**
   * String of one open question of a fleet turn (JSON: its turn, owner node, state and claim), in
   * the hash tag of its own id (`fleet.answer` knows nothing else); expires `leaseMs` after its
   * owner last renewed it.
   */
  question(questionId: string): string;
  /**
   * String of one turn id's claim (its holder), in the hash tag of the turn id itself: a turn id is
   * used once fleet-wide, in any session (src/fleet/turn-claims.ts).
   */
  turnClaim(turnId: string): string;
  /** The three keys of one session, in the scripts' KEYS order. */
  session(sessionId: string): [turns: string, finished: string, pending: string];
  /** Sorted set of running turns (`JSON [sessionId, turnId]`) by lease deadline: the sweep's hint. */
  readonly leases: string;
  /** Prefix of the node channels: a node subscribes to `nodeChannel(nodeId)` and nothing else. */
  readonly channelPrefix: string;
  nodeChannel(nodeId: string): string;
}

/**
 * Hash tags end at the first `}`; a session id holding one would split its keys across slots, so
 * `{` and `}` are percent-encoded too, after the wire form's own escapes (`%` and lone surrogates,
 * src/fleet/wire-id.ts): one-to-one, so two ids never share keys.
 */
function tag(id: string): string {
  return `{${toWire(id).replaceAll('{', '%7B').replaceAll('}', '%7D')}}`;
}

export function fleetKeys(prefix: string): FleetKeys {
  return {
    turns: (sessionId) => `${prefix}:${tag(sessionId)}:turns`,
    finished: (sessionId) => `${prefix}:${tag(sessionId)}:finished`,
    pending: (sessionId) => `${prefix}:${tag(sessionId)}:pending`,
    session: (sessionId) => {
      const t = tag(sessionId);
      return [`${prefix}:${t}:turns`, `${prefix}:${t}:finished`, `${prefix}:${t}:pending`];
    },
    question: (questionId) => `${prefix}:${tag(`q:${questionId}`)}:question`,
    turnClaim: (turnId) => `${prefix}:${tag(`t:${turnId}`)}:claim`,
    leases: `${prefix}:leases`,
    channelPrefix: `${prefix}:node:`,
    nodeChannel: (nodeId) => `${prefix}:node:${nodeId}`,
  };
}

/** The lease index member of one turn (JSON escapes a lone surrogate, so it is one-to-one too). */
export function leaseMember(sessionId: string, turnId: string): string {
  return JSON.stringify([sessionId, turnId]);
}

export function parseLeaseMember(member: string): [sessionId: string, turnId: string] | undefined {
  try {
    const value: unknown = JSON.parse(member);
    if (Array.isArray(value) && value.length === 2 && typeof value[0] === 'string' && typeof value[1] === 'string') {
      return [value[0], value[1]];
    }
  } catch { /* a foreign member: the caller drops it */ }
  return undefined;
}

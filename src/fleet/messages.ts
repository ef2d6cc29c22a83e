/**
 * The two messages a node receives on its channel (published by the scripts, never by hand):
 * `stop` (to the owner: stop this turn, if it is still yours at this epoch) and `ended` (to a
 * stop's requester: the turn reached a terminal status, with the owner's StopReport if it stopped).
 */
import type { FleetTurnStatus } from './answers.js';
import { fromWire } from './wire-id.js';

export interface StopMessage {
  kind: 'stop'; sessionId: string; turnId: string; epoch: number; reason?: string; graceMs?: number;
}

export interface EndedMessage {
  kind: 'ended'; sessionId: string; turnId: string; epoch: number; node: string; status: FleetTurnStatus;
  /** The owner's StopReport, as JSON (only when it stopped the turn itself). */
  report?: string;
}

export type FleetMessage = StopMessage | EndedMessage;

/** Parse a channel message; anything malformed is dropped (undefined), never thrown. */
export function parseMessage(raw: string): FleetMessage | undefined {
  let m: unknown;
  try { m = JSON.parse(raw); } catch { return undefined; }
  if (m === null || typeof m !== 'object') return undefined;
  const msg = m as Record<string, unknown>;
  if (typeof msg.sessionId !== 'string' || typeof msg.turnId !== 'string' || typeof msg.epoch !== 'number') return undefined;
  // The scripts publish ids in their wire form (src/fleet/wire-id.ts).
  if (msg.kind === 'stop' || msg.kind === 'ended') return { ...msg, sessionId: fromWire(msg.sessionId), turnId: fromWire(msg.turnId) } as unknown as FleetMessage;
  return undefined;
}

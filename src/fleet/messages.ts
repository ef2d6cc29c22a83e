/**
 * The messages a node receives on its channel (published by the scripts, never by hand): `stop`
 * (to the owner: stop this turn, if it is still yours at this epoch), `ended` (to a stop's
 * requester: the turn reached a terminal status, with the owner's StopReport if it stopped),
 * `answer` (to a question's owner: an answer was claimed) and `answered` (to the answer's
 * requester: the owner's runner accepted it or not).
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

/** To a question's owner: an answer was claimed for it (the answer itself is in the question's record). */
export interface AnswerMessage { kind: 'answer'; questionId: string; claim: string }

/** To an answer's requester: the owner's runner accepted it or not. */
export interface AnsweredMessage { kind: 'answered'; questionId: string; claim: string; accepted: boolean; node: string }

export type FleetMessage = StopMessage | EndedMessage | AnswerMessage | AnsweredMessage;

/** Parse a channel message; anything malformed is dropped (undefined), never thrown. */
export function parseMessage(raw: string): FleetMessage | undefined {
  let m: unknown;
  try { m = JSON.parse(raw); } catch { return undefined; }
  if (m === null || typeof m !== 'object') return undefined;
  const msg = m as Record<string, unknown>;
  if ((msg.kind === 'answer' || msg.kind === 'answered') && typeof msg.questionId === 'string' && typeof msg.claim === 'string') {
    if (msg.kind === 'answer') return { kind: 'answer', questionId: fromWire(msg.questionId), claim: msg.claim };
    if (typeof msg.accepted === 'boolean' && typeof msg.node === 'string') {
      return { kind: 'answered', questionId: fromWire(msg.questionId), claim: msg.claim, accepted: msg.accepted, node: msg.node };
    }
    return undefined;
  }
  if (typeof msg.sessionId !== 'string' || typeof msg.turnId !== 'string' || typeof msg.epoch !== 'number') return undefined;
  // The scripts publish ids in their wire form (src/fleet/wire-id.ts).
  if (msg.kind === 'stop' || msg.kind === 'ended') return { ...msg, sessionId: fromWire(msg.sessionId), turnId: fromWire(msg.turnId) } as unknown as FleetMessage;
  return undefined;
}

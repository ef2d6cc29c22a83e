/**
 * One MCP request as `fullstop/mcp` reads it, from either SDK major: v1 passes a tool callback
 * `extra` (`extra.signal`, `extra.sendNotification`), v2 passes `ctx` (`ctx.mcpReq.signal`,
 * `ctx.mcpReq.notify`). And why its signal aborted: the reason a stop of its turn records.
 *
 * Telling the aborts apart (pinned for each supported SDK version by test/mcp-sdk-order.test.ts):
 * - a disconnect: v2 aborts with an error whose `code` is `CONNECTION_CLOSED`; v1 aborts with no
 *   reason, in the same synchronous step that then drops the server's `transport`. So the abort is
 *   classified one microtask later: `transport` gone means a disconnect.
 * - the client's request timeout: both clients send `notifications/cancelled` whose reason is their
 *   timeout error as text (v1 `McpError: MCP error -32001: Request timed out`, v2 `SdkError:
 *   Request timed out`; `Maximum total timeout exceeded` for `maxTotalTimeout`): `cancel.timeout`.
 * - any other abort is the client's cancel: `cancel.client`.
 */

import { describe } from '../errors.js';
import { StopReasons } from '../constants.js';
import type { McpNotification, McpProgressToken, McpRequestContext, McpRequestExtra, McpToolExtra } from './types.js';

/** The parts of a request a call uses, whichever SDK major sent it. */
export interface McpRequest {
  readonly signal: AbortSignal;
  readonly progressToken: McpProgressToken | undefined;
  /** Send a notification related to this request; never rejects (a closed transport drops it). */
  notify(notification: McpNotification): Promise<void>;
}

/** The request of a tool callback's SDK argument; a TypeError naming `extra` for anything else. */
export function requestOf(extra: McpToolExtra | undefined): McpRequest {
  const v2 = (extra as Partial<McpRequestContext> | undefined)?.mcpReq;
  if (v2 !== null && typeof v2 === 'object' && v2.signal instanceof AbortSignal && typeof v2.notify === 'function') {
    return request(v2.signal, v2._meta?.progressToken, (n) => (v2.notify as (n: McpNotification) => Promise<void>).call(v2, n));
  }
  const v1 = extra as Partial<McpRequestExtra> | undefined;
  if (v1?.signal instanceof AbortSignal) {
    const send = typeof v1.sendNotification === 'function' ? v1.sendNotification as (n: McpNotification) => Promise<void> : undefined;
    return request(v1.signal, v1._meta?.progressToken, (n) => (send === undefined ? Promise.resolve() : send.call(v1, n)));
  }
  throw new TypeError(`extra: expected the MCP SDK's request extra (v1, with its signal) or context (v2, with mcpReq.signal), got ${describe(extra)}`);
}

function request(signal: AbortSignal, progressToken: unknown, send: (n: McpNotification) => Promise<void>): McpRequest {
  const token = typeof progressToken === 'string' || typeof progressToken === 'number' ? progressToken : undefined;
  return {
    signal,
    progressToken: token,
    async notify(notification) {
      try {
        await send(notification);
      } catch {
        // The transport closed under the call: its turn is being stopped as a disconnect.
      }
    },
  };
}

/** The client SDKs' request-timeout texts, as their `notifications/cancelled` carries them. */
const TIMEOUT_REASON = /MCP error -32001\b|\bRequest timed out\b|\bMaximum total timeout exceeded\b/;

/**
 * The stop reason of an aborted request: `cancel.disconnect`, `cancel.timeout` or `cancel.client`.
 * Call it one microtask after the abort (see above) with whether the server's transport is gone.
 */
export function stopReasonOf(signal: AbortSignal, transportGone: boolean): string {
  const reason: unknown = signal.reason;
  if (transportGone || (reason as { code?: unknown } | null)?.code === 'CONNECTION_CLOSED') return StopReasons.disconnect;
  return cancelReasonOf(reason);
}

/** The stop reason of a `notifications/cancelled` whose `reason` is `reason`: `cancel.timeout` or `cancel.client`. */
export function cancelReasonOf(reason: unknown): string {
  const text = typeof reason === 'string' ? reason : reason instanceof Error ? reason.message : '';
  return TIMEOUT_REASON.test(text) ? StopReasons.timeout : StopReasons.client;
}

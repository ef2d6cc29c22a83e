/**
 * Who sent an MCP message, and the fleet address of a call: what lets a `notifications/cancelled`
 * that lands on another instance (or on a fresh server, as stateless Streamable HTTP makes one per
 * request) name the call it cancels.
 *
 * A request id alone names nothing across instances: it restarts at 0 for every client. So a
 * call's address is a hash of (the caller's identity, the request id), the identity being what the
 * client sends with both the call and its cancel:
 * 1. By default the MCP session id: Streamable HTTP's `mcp-session-id` in stateful mode (the
 *    transport's, or the header's on an instance that does not hold the session). Stateless mode
 *    has none, so there the host passes `identify(caller)` (a header the client sets per
 *    connection, its auth info).
 * 2. The address is the same on every instance (no random part) and holds no identity in clear
 *    (an identity may be a credential; Redis keys are read by operators).
 * 3. A call with no identity gets no address: only its own server's cancel and close stop it.
 */

import { createHash } from 'node:crypto';
import type { McpRequestContext, McpRequestExtra, McpToolExtra } from './types.js';

/** What `identify` reads of a call or of a cancel: the same fields for both, from either SDK major. */
export interface McpCaller {
  /** The transport's session id (`mcp-session-id`, stateful Streamable HTTP); undefined in stateless mode and over stdio. */
  readonly sessionId: string | undefined;
  /** The HTTP request's headers (empty over stdio or in memory). */
  readonly headers: Headers;
  /** The auth info the host's middleware attached to the request (`req.auth`), if any. */
  readonly authInfo: unknown;
}

/** Returns the caller's identity: the same string for a call and for its cancel, and for no other client. */
export type McpIdentify = (caller: McpCaller) => string | undefined;

/**
 * The default identity: the MCP session id, as the transport knows it (stateful mode) or, on a
 * server that does not hold that session (a stateless fallback on another instance), as the
 * client's `mcp-session-id` header says. Stateless clients send none: no identity.
 */
export const bySession: McpIdentify = (caller) => caller.sessionId ?? caller.headers.get('mcp-session-id') ?? undefined;

/** The fleet address of a call: its session id and turn id. */
export interface CallAddress {
  readonly sessionId: string;
  readonly turnId: string;
}

/** The address of request `requestId` from the caller `identity` (invariant 2). */
export function addressOf(identity: string, requestId: string | number): CallAddress {
  const hash = createHash('sha256').update(JSON.stringify([identity, requestId])).digest('hex').slice(0, 40);
  return { sessionId: `mcp-${hash}`, turnId: `mcp-${hash}-call` };
}

type HeaderRecord = Record<string, string | string[] | undefined>;

function headersOf(given: unknown): Headers {
  if (given instanceof Headers) return given;
  const headers = new Headers();
  if (given === null || typeof given !== 'object') return headers;
  for (const [name, value] of Object.entries(given as HeaderRecord)) {
    if (typeof value === 'string') headers.append(name, value);
    else if (Array.isArray(value)) for (const v of value) headers.append(name, v);
  }
  return headers;
}

/** The caller of a tool call: v1's `extra` (`requestInfo.headers`, `authInfo`) or v2's `ctx` (`http.req`, `http.authInfo`). */
export function callerOfCall(extra: McpToolExtra): McpCaller {
  const v2 = extra as Partial<McpRequestContext> & { http?: { req?: { headers?: unknown }; authInfo?: unknown } };
  if (v2.mcpReq !== undefined) {
    return { sessionId: v2.sessionId, headers: headersOf(v2.http?.req?.headers), authInfo: v2.http?.authInfo };
  }
  const v1 = extra as Partial<McpRequestExtra> & { requestInfo?: { headers?: unknown }; authInfo?: unknown };
  return { sessionId: v1.sessionId, headers: headersOf(v1.requestInfo?.headers), authInfo: v1.authInfo };
}

/** The request id of a tool call, from either SDK major. */
export function requestIdOfCall(extra: McpToolExtra): string | number | undefined {
  const id = (extra as Partial<McpRequestContext>).mcpReq?.id ?? (extra as Partial<McpRequestExtra>).requestId;
  return typeof id === 'string' || typeof id === 'number' ? id : undefined;
}

/**
 * The caller of a message as the transport hands it to the server (`onmessage(message, extra)`):
 * v1's extra has `requestInfo.headers`, v2's the fetch `request`; both `authInfo`.
 */
export function callerOfMessage(extra: unknown, sessionId: unknown): McpCaller {
  const e = (extra ?? {}) as { requestInfo?: { headers?: unknown }; request?: { headers?: unknown }; authInfo?: unknown };
  return {
    sessionId: typeof sessionId === 'string' ? sessionId : undefined,
    headers: headersOf(e.request?.headers ?? e.requestInfo?.headers),
    authInfo: e.authInfo,
  };
}

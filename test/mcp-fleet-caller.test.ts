/**
 * How `fullstop/mcp` names a call for its cancel across instances (src/mcp/caller.ts): the caller
 * read alike from either SDK major's tool argument and from the transport's message extra, and an
 * address every instance computes alike, holding no identity in clear.
 */
import { describe, expect, it } from 'vitest';
import { addressOf, bySession, callerOfCall, callerOfMessage, requestIdOfCall } from '../dist/src/mcp/caller.js';

const signal = new AbortController().signal;

describe('the caller of a call and of its cancel', () => {
  it("reads v1's extra (requestInfo.headers as a record, arrays too) and v2's ctx (http.req's Headers) alike", () => {
    const v1 = callerOfCall({
      signal, requestId: 7, sessionId: 's-1', sendNotification: async () => {},
      requestInfo: { headers: { 'x-mcp-client': 'c-1', 'x-list': ['a', 'b'] } }, authInfo: { clientId: 'u' },
    } as any);
    expect(v1.sessionId).toBe('s-1');
    expect(v1.headers.get('X-MCP-Client')).toBe('c-1');
    expect(v1.headers.get('x-list')).toBe('a, b');
    expect(v1.authInfo).toEqual({ clientId: 'u' });
    const v2 = callerOfCall({
      sessionId: undefined, mcpReq: { id: 7, signal, notify: async () => {} },
      http: { req: new Request('http://h/mcp', { headers: { 'x-mcp-client': 'c-1' } }), authInfo: { clientId: 'u' } },
    } as any);
    expect(v2.sessionId).toBeUndefined();
    expect(v2.headers.get('x-mcp-client')).toBe('c-1');
    expect(v2.authInfo).toEqual({ clientId: 'u' });
    expect(requestIdOfCall({ signal, requestId: 7 } as any)).toBe(7);
    expect(requestIdOfCall({ mcpReq: { id: 'r-7', signal } } as any)).toBe('r-7');
  });

  it("reads the transport's message extra: v1's requestInfo, v2's fetch request; no extra (stdio) is an empty caller", () => {
    const v1 = callerOfMessage({ requestInfo: { headers: { 'mcp-session-id': 's-9' } }, authInfo: 'a' }, undefined);
    expect(bySession(v1)).toBe('s-9');
    expect(v1.authInfo).toBe('a');
    const v2 = callerOfMessage({ request: new Request('http://h/mcp', { method: 'POST', headers: { 'x-mcp-client': 'c-2' } }) }, 's-held');
    expect(v2.sessionId).toBe('s-held');
    expect(bySession(v2)).toBe('s-held');
    expect(v2.headers.get('x-mcp-client')).toBe('c-2');
    const none = callerOfMessage(undefined, undefined);
    expect([...none.headers]).toEqual([]);
    expect(bySession(none)).toBeUndefined();
  });
});

describe('a call address', () => {
  it('is the same for the same identity and request id, differs otherwise (1 and "1" too), and holds no identity in clear', () => {
    const a = addressOf('user:secret-token', 1);
    expect(addressOf('user:secret-token', 1)).toEqual(a);
    expect(addressOf('user:secret-token', '1')).not.toEqual(a);
    expect(addressOf('user:secret-token', 2)).not.toEqual(a);
    expect(addressOf('other', 1)).not.toEqual(a);
    expect(a.turnId).toBe(`${a.sessionId}-call`);
    expect(a.sessionId).toMatch(/^mcp-[0-9a-f]{40}$/);
    expect(JSON.stringify(a)).not.toContain('secret');
  });
});

/**
 * What fullstop/mcp reads of each supported MCP SDK's behaviour that its public API does not
 * promise (src/mcp/request.ts), pinned per version so an SDK upgrade that changes it fails here
 * first, with the SDK's own low-level Server and Client (no fullstop involved):
 * - a transport close aborts every in-flight handler's signal, and one microtask after that abort
 *   the server's `transport` is gone (v1 aborts with no reason, then drops it in the same step;
 *   v2 drops it first and aborts with a `CONNECTION_CLOSED` error);
 * - a client's cancel aborts the signal with the client's reason, the transport still there;
 * - a client's request timeout cancels with a reason text naming the timeout.
 */
import { describe, expect, it } from 'vitest';
import { SDKS } from './fixtures/integrations/mcp-sdks.js';

interface Seen { reason: unknown; transportGoneAtAbort: boolean; transportGoneAMicrotaskLater: boolean }

describe.each(SDKS)('MCP SDK v$major ($version), as fullstop/mcp reads it', (sdk) => {
  /** A low-level server whose tools/call waits for its signal's abort and reports what it saw. */
  async function scene() {
    let seen!: (s: Seen) => void;
    const aborted = new Promise<Seen>((resolve) => { seen = resolve; });
    let started!: () => void;
    const running = new Promise<void>((resolve) => { started = resolve; });
    const server = sdk.lowLevelServer((_request, extra) => new Promise(() => {
      const signal: AbortSignal = sdk.major === 1 ? extra.signal : extra.mcpReq.signal;
      signal.addEventListener('abort', () => {
        const transportGoneAtAbort = server.transport === undefined;
        queueMicrotask(() => seen({ reason: signal.reason, transportGoneAtAbort, transportGoneAMicrotaskLater: server.transport === undefined }));
      }, { once: true });
      started();
    }));
    const [clientSide, serverSide] = sdk.linkedPair();
    await server.connect(serverSide);
    const client = sdk.client();
    await client.connect(clientSide);
    return { client, aborted, running };
  }

  it('a transport close aborts the handler, and its transport is gone one microtask after the abort', async () => {
    const { client, aborted, running } = await scene();
    const call = sdk.callTool(client, { name: 'x' });
    call.catch(() => {});
    await running;
    await client.close();
    const s = await aborted;
    expect(s.transportGoneAMicrotaskLater).toBe(true);
    if (sdk.major === 1) {
      expect(s.transportGoneAtAbort).toBe(false); // why request.ts reads the transport a microtask later
      expect(s.reason).toMatchObject({ name: 'AbortError' });
    } else {
      expect(s.reason).toMatchObject({ code: 'CONNECTION_CLOSED' });
    }
  });

  it("a client's cancel aborts the handler with its reason, the transport still there", async () => {
    const { client, aborted, running } = await scene();
    const cancel = new AbortController();
    const call = sdk.callTool(client, { name: 'x' }, { signal: cancel.signal });
    call.catch(() => {});
    await running;
    cancel.abort('stop it');
    const s = await aborted;
    expect(s).toMatchObject({ reason: 'stop it', transportGoneAMicrotaskLater: false });
    await client.close();
  });

  it("a client's request timeout cancels with a reason naming the timeout", async () => {
    const { client, aborted, running } = await scene();
    const call = sdk.callTool(client, { name: 'x' }, { timeout: 1000 }); // long enough for the handler to start under load
    call.catch(() => {});
    await running;
    const s = await aborted;
    expect(s.transportGoneAMicrotaskLater).toBe(false);
    expect(s.reason).toEqual(sdk.major === 1 ? 'McpError: MCP error -32001: Request timed out' : 'SdkError: Request timed out');
    await client.close();
  });
});

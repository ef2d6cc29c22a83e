/**
 * How a server bound with `mcpTurns(server, { runner, fleet })` hands a cancel to the fleet
 * (src/mcp/cancels.ts), with each SDK major over its in-memory transport and a fleet that records
 * its stops: whether the server was connected before or after `mcpTurns`, a cancel for a call it
 * does not run goes to `fleet.stop` at the call's address, with the reason the client's text says.
 */
import { describe, expect, it } from 'vitest';
import { TurnRegistry, TurnRunner } from '../dist/src/index.js';
import { mcpTurns } from '../dist/src/mcp/index.js';
import { addressOf } from '../dist/src/mcp/caller.js';
import { SDKS } from './fixtures/integrations/mcp-sdks.js';
import { eventually } from './support/leaks.js';

/** A fleet whose `stop` records what it was asked (answering not_found) and that runs nothing. */
function recordingFleet() {
  const stops: Array<{ sessionId: string; options: unknown }> = [];
  return {
    stops,
    fleet: {
      run: async () => { throw new Error('no call runs in this spec'); },
      stop: async (sessionId: string, options?: unknown) => { stops.push({ sessionId, options }); return { outcome: 'not_found' }; },
    },
  };
}

describe.each(SDKS)('cancels to the fleet, MCP SDK v$major ($version)', (sdk) => {
  for (const order of ['before', 'after'] as const) {
    it(`sends a cancel for a call it does not run to fleet.stop at the call's address (server connected ${order} mcpTurns)`, async () => {
      const runner = new TurnRunner({ registry: new TurnRegistry() });
      const { stops, fleet } = recordingFleet();
      const server = sdk.mcpServer();
      const [clientSide, serverSide] = sdk.linkedPair();
      if (order === 'before') await server.connect(serverSide);
      mcpTurns(server, { runner, fleet, identify: () => 'client-7' });
      if (order === 'after') await server.connect(serverSide);
      const client = sdk.client();
      await client.connect(clientSide);
      try {
        await client.notification({ method: 'notifications/cancelled', params: { requestId: 5, reason: 'the user pressed stop' } });
        await client.notification({ method: 'notifications/cancelled', params: { requestId: 6, reason: 'SdkError: Request timed out' } });
        await eventually(() => stops.length === 2, 5000, 'two stops');
        const five = addressOf('client-7', 5);
        const six = addressOf('client-7', 6);
        expect(stops).toEqual([
          { sessionId: five.sessionId, options: { turnId: five.turnId, reason: 'cancel.client', wait: false } },
          { sessionId: six.sessionId, options: { turnId: six.turnId, reason: 'cancel.timeout', wait: false } },
        ]);
      } finally {
        await client.close();
      }
    });
  }

  it('sends nothing for a caller with no identity (the default over an in-memory transport: no session id, no headers)', async () => {
    const runner = new TurnRunner({ registry: new TurnRegistry() });
    const { stops, fleet } = recordingFleet();
    const server = sdk.mcpServer();
    mcpTurns(server, { runner, fleet });
    const [clientSide, serverSide] = sdk.linkedPair();
    await server.connect(serverSide);
    const client = sdk.client();
    await client.connect(clientSide);
    try {
      await client.notification({ method: 'notifications/cancelled', params: { requestId: 5, reason: 'stop' } });
      // A ping answered means the notification before it was handled.
      await client.ping();
      expect(stops).toEqual([]);
    } finally {
      await client.close();
    }
  });
});

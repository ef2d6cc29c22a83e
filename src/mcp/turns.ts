/**
 * `mcpTurns(server, { runner })`: each MCP tool call as one turn of a `TurnRunner`, stopped by the
 * client's `notifications/cancelled` (`cancel.client`) or by the transport closing
 * (`cancel.disconnect`), and answered as docs/design.md §8 says (results.ts).
 *
 * Telling a cancel from a close: the SDK (1.x) aborts a request's `extra.signal` with the client's
 * reason for a `notifications/cancelled`, and with no reason for every request in flight when the
 * transport closes — in the same synchronous step that then drops `transport`. So the abort is read
 * one microtask later: `transport` gone means a disconnect, else the client's cancel.
 */

import { randomBytes } from 'node:crypto';
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import type { ServerNotification, ServerRequest } from '@modelcontextprotocol/sdk/types.js';
import { abortedToolText } from '../ledger/entry.js';
import { checkFunction, describe } from '../errors.js';
import type { Turn } from '../turn/active-turn.js';
import type { StopReport } from '../turn/report.js';
import { TurnRunner } from '../turn/runner.js';
import { StopReasons } from '../constants.js';
import { resultOf, toolErrorResult, errorResult, type CallToolResult } from './results.js';


/**
 * What the SDK passes a tool callback as `extra`: its `signal` is aborted on the client's cancel,
 * and (with no reason) when the transport closes.
 */
export type McpToolExtra = RequestHandlerExtra<ServerRequest, ServerNotification>;

/** An MCP server `mcpTurns` accepts: an `McpServer` (its `server`), or the low-level `Server`. */
export interface McpServerLike {
  /** `McpServer.server`: the low-level `Server` that owns the transport. */
  server?: { readonly transport?: unknown };
  /** The low-level `Server`'s transport: `undefined` once it closed. */
  readonly transport?: unknown;
  connect(transport: never): Promise<void>;
}

/** A tool body: the call's arguments (undefined for a tool without `inputSchema`), its turn, the SDK's `extra`. */
export type McpTurnHandler<A> = (args: A, turn: Turn, extra: McpToolExtra) => Promise<CallToolResult> | CallToolResult;

/** What `mcpTurns` returns. */
export interface McpTurns {
  /**
   * An MCP tool callback (for `registerTool`/`tool`) that runs each call as one turn of the runner
   * (a session of its own, a fresh turn id), with the call's arguments as the turn's `input`.
   * @throws TypeError naming `handler` when it is not a function.
   */
  tool<A = unknown>(handler: McpTurnHandler<A>): (args: A, extra?: McpToolExtra) => Promise<CallToolResult>;
  /**
   * Stop every call of this server still running; resolves with their reports (once each is emitted).
   * @param reason the stop's reason. @default 'cancel.shutdown'
   */
  stopAll(reason?: string): Promise<StopReport[]>;
}

/**
 * Bind the tool calls of one MCP server to `runner`. The host closes the server's transport when
 * the peer goes away (the SDK's transports do not): for stdio, `process.stdin.on('end', ...)`; for
 * Streamable HTTP, the response's `'close'`, as the SDK's stateless example does.
 *
 * @param server an `McpServer`, or the low-level `Server`.
 * @param options.runner the runner whose turns the calls become.
 * @throws TypeError naming `server` or `options.runner` when either is not what it should be.
 * @example
 * const turns = mcpTurns(server, { runner });
 * server.registerTool('crunch', { inputSchema: { n: z.number() } }, turns.tool(async (args, turn) => {
 *   const n = await turn.tool('crunch', args, () => pool.run(args));
 *   return { content: [{ type: 'text', text: String(n) }] };
 * }));
 */
export function mcpTurns(server: McpServerLike, options: { runner: TurnRunner }): McpTurns {
  if (server === null || typeof server !== 'object' || typeof (server as Partial<McpServerLike>).connect !== 'function') {
    throw new TypeError(`server: expected an MCP server (McpServer or Server), got ${describe(server)}`);
  }
  const given = (options as Partial<{ runner: unknown }> | undefined)?.runner;
  if (!(given instanceof TurnRunner)) throw new TypeError(`options.runner: expected a TurnRunner, got ${describe(given)}`);
  const runner: TurnRunner = given;
  // The low-level Server owns the transport; an McpServer holds it as `server`.
  const protocol = server.server ?? server;
  const prefix = `mcp-${randomBytes(6).toString('hex')}`;
  const running = new Set<string>();
  let calls = 0;

  async function call<A>(handler: McpTurnHandler<A>, args: A, extra: McpToolExtra): Promise<CallToolResult> {
    if (!((extra as Partial<McpToolExtra> | undefined)?.signal instanceof AbortSignal)) {
      throw new TypeError(`extra: expected the MCP SDK's request extra (with its signal), got ${describe(extra)}`);
    }
    const n = ++calls;
    const sessionId = `${prefix}-${n}`;
    const startedAt = performance.now();
    let stoppedAt: number | undefined;
    if (extra.signal.aborted) return errorResult(abortedToolText(0));
    const onAbort = () => queueMicrotask(() => {
      void runner.stop(sessionId, { reason: protocol.transport === undefined ? StopReasons.disconnect : StopReasons.client });
    });
    extra.signal.addEventListener('abort', onAbort, { once: true });
    running.add(sessionId);
    try {
      const outcome = await runner.run(sessionId, async (turn) => {
        turn.signal.addEventListener('abort', () => { stoppedAt ??= performance.now(); }, { once: true });
        try {
          return await handler(args, turn, extra);
        } catch (error) {
          return toolErrorResult(error);
        }
      }, { turnId: `${sessionId}-call`, input: args });
      return resultOf(outcome, () => abortedToolText((stoppedAt ?? startedAt) - startedAt));
    } finally {
      running.delete(sessionId);
      extra.signal.removeEventListener('abort', onAbort);
    }
  }

  return {
    tool<A>(handler: McpTurnHandler<A>) {
      checkFunction('handler', handler);
      // The SDK calls a tool without `inputSchema` as cb(extra), one with it as cb(args, extra).
      return (...params: [A, McpToolExtra?]) => (params.length >= 2
        ? call(handler, params[0], params[1]!)
        : call(handler, undefined as A, params[0] as unknown as McpToolExtra));
    },
    async stopAll(reason = StopReasons.shutdown) {
      const reports = await Promise.all([...running].map((sessionId) => runner.stop(sessionId, { reason })));
      return reports.filter((r): r is StopReport => r !== null);
    },
  };
}

/**
 * `mcpTurns(server, { runner })`: each MCP tool call as one turn of a `TurnRunner`, stopped by the
 * client's `notifications/cancelled` (`cancel.client`, or `cancel.timeout` when it is the client
 * SDK's request timeout) or by the transport closing (`cancel.disconnect`), and answered as
 * docs/design.md §8 says (results.ts). The same code serves the v1 and the v2 SDK (request.ts).
 */

import { randomBytes } from 'node:crypto';
import { abortedToolText } from '../ledger/entry.js';
import { checkFunction, checkMs, describe } from '../errors.js';
import type { Turn } from '../turn/active-turn.js';
import type { StopReport } from '../turn/report.js';
import { TurnRunner } from '../turn/runner.js';
import { DEFAULT_MCP_PROGRESS_INTERVAL_MS, StopReasons } from '../constants.js';
import { startProgress } from './progress.js';
import { requestOf, stopReasonOf } from './request.js';
import { resultOf, toolErrorResult, errorResult } from './results.js';
import type { CallToolResult, McpServerLike, McpToolExtra } from './types.js';

/**
 * A tool body: the call's arguments (undefined for a tool without `inputSchema`), its turn, and the
 * SDK's request argument as the SDK passed it (v1's `extra`, v2's `ctx`).
 */
export type McpTurnHandler<A, E extends McpToolExtra = McpToolExtra> =
  (args: A, turn: Turn, extra: E) => Promise<CallToolResult> | CallToolResult;

/** The options of `mcpTurns`. */
export interface McpTurnsOptions {
  /** The runner whose turns the calls become. */
  runner: TurnRunner;
  /**
   * While a call runs and its request carried a `progressToken`, a `notifications/progress` every
   * this many ms (and one for each `turn.say(text)`, with that text), so a client using
   * `resetTimeoutOnProgress` does not time a long call out. 0: no periodic one (`say` still sends).
   * None once the request is cancelled, though its turn may still be winding down.
   * @default 10000
   */
  progressIntervalMs?: number;
}

/** What `mcpTurns` returns. */
export interface McpTurns {
  /**
   * An MCP tool callback (for `registerTool`/`tool`, v1 or v2) that runs each call as one turn of
   * the runner (a session of its own, a fresh turn id), with the call's arguments as its `input`.
   * @throws TypeError naming `handler` when it is not a function.
   */
  tool<A = unknown, E extends McpToolExtra = McpToolExtra>(handler: McpTurnHandler<A, E>): (args: A, extra?: E) => Promise<CallToolResult>;
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
 * @param server an `McpServer` (v1 or v2), or the low-level `Server`.
 * @param options.runner the runner whose turns the calls become.
 * @param options.progressIntervalMs the period of a long call's progress notifications. @default 10000
 * @throws TypeError naming `server` or `options.runner` when either is not what it should be;
 *   TypeError or RangeError naming `options.progressIntervalMs` for a bad one.
 * @example
 * const turns = mcpTurns(server, { runner });
 * server.registerTool('crunch', { inputSchema: { n: z.number() } }, turns.tool(async (args, turn) => {
 *   const n = await turn.tool('crunch', args, () => pool.run(args));
 *   return { content: [{ type: 'text', text: String(n) }] };
 * }));
 */
export function mcpTurns(server: McpServerLike, options: McpTurnsOptions): McpTurns {
  if (server === null || typeof server !== 'object' || typeof (server as Partial<McpServerLike>).connect !== 'function') {
    throw new TypeError(`server: expected an MCP server (McpServer or Server), got ${describe(server)}`);
  }
  const given = (options as Partial<McpTurnsOptions> | undefined)?.runner;
  if (!(given instanceof TurnRunner)) throw new TypeError(`options.runner: expected a TurnRunner, got ${describe(given)}`);
  const runner: TurnRunner = given;
  const { progressIntervalMs = DEFAULT_MCP_PROGRESS_INTERVAL_MS } = options;
  checkMs('options.progressIntervalMs', progressIntervalMs);
  // The low-level Server owns the transport; an McpServer holds it as `server`.
  const protocol = server.server ?? server;
  const prefix = `mcp-${randomBytes(6).toString('hex')}`;
  const running = new Set<string>();
  let calls = 0;

  async function call<A>(handler: McpTurnHandler<A, McpToolExtra>, args: A, extra: McpToolExtra): Promise<CallToolResult> {
    const request = requestOf(extra);
    const n = ++calls;
    const sessionId = `${prefix}-${n}`;
    const startedAt = performance.now();
    let stoppedAt: number | undefined;
    if (request.signal.aborted) return errorResult(abortedToolText(0, stopReasonOf(request.signal, false)));
    // One microtask later: v1 drops `transport` right after aborting (request.ts).
    const onAbort = () => queueMicrotask(() => {
      void runner.stop(sessionId, { reason: stopReasonOf(request.signal, protocol.transport === undefined) });
    });
    request.signal.addEventListener('abort', onAbort, { once: true });
    running.add(sessionId);
    const endProgress = startProgress(runner, sessionId, request, progressIntervalMs);
    try {
      const outcome = await runner.run(sessionId, async (turn) => {
        turn.signal.addEventListener('abort', () => { stoppedAt ??= performance.now(); }, { once: true });
        try {
          return await handler(args, turn, extra);
        } catch (error) {
          return toolErrorResult(error);
        }
      }, { turnId: `${sessionId}-call`, input: args });
      return resultOf(outcome, () => abortedToolText((stoppedAt ?? startedAt) - startedAt, outcome.status === 'cancelled' ? outcome.report.reason : undefined));
    } finally {
      endProgress();
      running.delete(sessionId);
      request.signal.removeEventListener('abort', onAbort);
    }
  }

  return {
    tool<A, E extends McpToolExtra>(handler: McpTurnHandler<A, E>) {
      checkFunction('handler', handler);
      const h = handler as McpTurnHandler<A, McpToolExtra>;
      // Both SDKs call a tool without `inputSchema` as cb(extra), one with it as cb(args, extra).
      return (...params: [A, E?]) => (params.length >= 2
        ? call(h, params[0], params[1]!)
        : call(h, undefined as A, params[0] as unknown as McpToolExtra));
    },
    async stopAll(reason = StopReasons.shutdown) {
      const reports = await Promise.all([...running].map((sessionId) => runner.stop(sessionId, { reason })));
      return reports.filter((r): r is StopReport => r !== null);
    },
  };
}

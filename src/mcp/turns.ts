/**
 * `mcpTurns(server, { runner })`: each MCP tool call as one turn of a `TurnRunner`, stopped by the
 * client's `notifications/cancelled` (`cancel.client`, or `cancel.timeout` when it is the client
 * SDK's request timeout) or by the transport closing (`cancel.disconnect`), and answered as
 * docs/design.md §8 says (results.ts). The same code serves the v1 and the v2 SDK (request.ts).
 * With a fleet, each call runs through `fleet.run` at an address every instance computes alike
 * (caller.ts), and a cancel that reaches any server is sent to the fleet (cancels.ts).
 */

import { randomBytes } from 'node:crypto';
import { abortedToolText } from '../ledger/entry.js';
import { checkFunction, checkMs, describe, TurnIdUsedError } from '../errors.js';
import type { Turn } from '../turn/active-turn.js';
import type { StopReport, TurnOutcome } from '../turn/report.js';
import { TurnRunner } from '../turn/runner.js';
import { DEFAULT_MCP_PROGRESS_INTERVAL_MS, StopReasons } from '../constants.js';
import { addressOf, bySession, callerOfCall, requestIdOfCall, type CallAddress, type McpIdentify } from './caller.js';
import { watchCancels, type CancelFleet } from './cancels.js';
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
  /**
   * The fleet (`fullstop/fleet`, started with this `runner`) the calls run through: each call's
   * turn is `fleet.run`, and a `notifications/cancelled` that reaches any server of any instance
   * sharing the fleet's Redis stops the call wherever it runs (`cancel.client`, or
   * `cancel.timeout`). A cancel finds its call by the caller's identity (`identify`) and the
   * request id. Without a fleet, only the server that runs a call sees its cancel.
   */
  fleet?: McpFleet;
  /**
   * The caller's identity, read from a call and from a cancel alike: the same string for both,
   * and one no other client sends while its request ids may repeat this client's (request ids
   * restart at 0 for every client). `undefined`: the call cannot be cancelled from another
   * server. Used only with `fleet`. Stateless Streamable HTTP has no session id, so there pass
   * one, e.g. from a header the client sets once per connection (combined with the user of
   * `caller.authInfo`, so one user cannot cancel another's calls).
   * @default the MCP session id (stateful Streamable HTTP): the transport's, else the request's
   *   `mcp-session-id` header (an instance that does not hold the session, serving its cancel)
   */
  identify?: McpIdentify;
}

/**
 * The part of a `Fleet` (`fullstop/fleet`) that `mcpTurns` uses, declared structurally so that
 * `fullstop/mcp`'s types need no Redis client package: a `Fleet` is one.
 */
export interface McpFleet extends CancelFleet {
  run<T>(sessionId: string, body: (turn: Turn) => Promise<T>, options?: { turnId?: string; input?: unknown }): Promise<TurnOutcome<T>>;
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
 * @param options.fleet run each call through this fleet, so that its cancel stops it from any instance.
 * @param options.identify the caller's identity, for a cancel to find its call. @default the transport's session id
 * @throws TypeError naming `server` or `options.runner` when either is not what it should be;
 *   TypeError or RangeError naming `options.progressIntervalMs` for a bad one; TypeError naming
 *   `options.fleet` or `options.identify` when either is not what it should be.
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
  const { progressIntervalMs = DEFAULT_MCP_PROGRESS_INTERVAL_MS, fleet, identify = bySession } = options;
  checkMs('options.progressIntervalMs', progressIntervalMs);
  if (fleet !== undefined && (fleet === null || typeof fleet !== 'object' || typeof fleet.run !== 'function' || typeof fleet.stop !== 'function')) {
    throw new TypeError(`options.fleet: expected a Fleet (fullstop/fleet), got ${describe(fleet)}`);
  }
  checkFunction('options.identify', identify);
  // The low-level Server owns the transport; an McpServer holds it as `server`.
  const protocol = server.server ?? server;
  const prefix = `mcp-${randomBytes(6).toString('hex')}`;
  const running = new Set<string>();
  let calls = 0;
  if (fleet !== undefined) watchCancels(server, protocol.transport, fleet, identify, (sessionId) => running.has(sessionId));

  /** The call's fleet address; undefined without a fleet, or for a caller with no identity. */
  function addressOfCall(extra: McpToolExtra): CallAddress | undefined {
    if (fleet === undefined) return undefined;
    const requestId = requestIdOfCall(extra);
    const identity = identify(callerOfCall(extra));
    return requestId === undefined || typeof identity !== 'string' || identity === '' ? undefined : addressOf(identity, requestId);
  }

  async function call<A>(handler: McpTurnHandler<A, McpToolExtra>, args: A, extra: McpToolExtra): Promise<CallToolResult> {
    const request = requestOf(extra);
    const n = ++calls;
    const address = addressOfCall(extra);
    const sessionId = address?.sessionId ?? `${prefix}-${n}`;
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
      const body = async (turn: Turn) => {
        turn.signal.addEventListener('abort', () => { stoppedAt ??= performance.now(); }, { once: true });
        try {
          return await handler(args, turn, extra);
        } catch (error) {
          return toolErrorResult(error);
        }
      };
      const run = (turnId: string) => (fleet === undefined
        ? runner.run(sessionId, body, { turnId, input: args })
        : fleet.run(sessionId, body, { turnId, input: args }));
      let outcome: TurnOutcome<CallToolResult>;
      try {
        outcome = await run(address?.turnId ?? `${sessionId}-call`);
      } catch (error) {
        // The caller's identity was reused with a request id it sent before (a client restarted
        // under the same identity): the call runs under a fresh turn id of the same session, which
        // a cancel elsewhere still reaches while it runs (cancels.ts, invariant 3).
        if (address === undefined || !(error instanceof TurnIdUsedError)) throw error;
        outcome = await run(`${address.turnId}-${randomBytes(6).toString('hex')}`);
      }
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

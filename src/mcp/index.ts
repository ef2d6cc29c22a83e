/**
 * `fullstop/mcp`: MCP tool calls as turns of a `TurnRunner`, stopped by the client's cancel, its
 * request timeout and the transport closing; with the v1 SDK (`@modelcontextprotocol/sdk` 1.x) and
 * the v2 one (`@modelcontextprotocol/server` 2.x). It loads no SDK, and its types name none (they
 * are declared structurally in types.ts): either SDK stays an optional peer.
 */

export { mcpTurns, type McpTurns, type McpTurnHandler, type McpTurnsOptions, type McpFleet } from './turns.js';
export type { McpCaller, McpIdentify } from './caller.js';
export type {
  CallToolResult, McpToolExtra, McpRequestExtra, McpRequestContext, McpServerLike, McpContentBlock,
  McpAnnotations, McpNotification, McpProgressToken, McpRequestMeta,
} from './types.js';

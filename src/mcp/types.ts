/**
 * The shapes `fullstop/mcp` reads of an MCP SDK, declared here structurally so that its
 * declarations need no SDK package: a consumer that installed only `@modelcontextprotocol/sdk`
 * (1.x) and one that installed only `@modelcontextprotocol/server` (2.x) both type-check them.
 * Each is the subset fullstop uses; the SDKs' own objects are assignable to them.
 */

/** A progress token a request carried (`_meta.progressToken`). */
export type McpProgressToken = string | number;

/** A notification a tool sends back to its client (fullstop sends `notifications/progress`). */
export interface McpNotification {
  method: string;
  params?: { [key: string]: unknown };
}

/** The request's `_meta` as far as fullstop reads it. */
export interface McpRequestMeta {
  progressToken?: McpProgressToken;
}

/**
 * What the v1 SDK (`@modelcontextprotocol/sdk` 1.x) passes a tool callback as `extra`: its
 * `signal` aborts on the client's cancel, and (with no reason) when the transport closes.
 */
export interface McpRequestExtra {
  signal: AbortSignal;
  requestId: string | number;
  sessionId?: string;
  _meta?: McpRequestMeta;
  sendNotification(notification: never): Promise<void>;
}

/**
 * What the v2 SDK (`@modelcontextprotocol/server` 2.x) passes a tool callback as `ctx`: the
 * request at `mcpReq`, whose `signal` aborts on the client's cancel and, with a
 * `CONNECTION_CLOSED` error, when the transport closes.
 */
export interface McpRequestContext {
  sessionId?: string;
  mcpReq: {
    id: string | number;
    signal: AbortSignal;
    _meta?: McpRequestMeta;
    notify(notification: never): Promise<void>;
  };
}

/** The SDK's request argument of a tool callback: v1's `extra` or v2's `ctx`, passed on as given. */
export type McpToolExtra = McpRequestExtra | McpRequestContext;

/** An annotation of a content block, as MCP defines it. */
export type McpAnnotations = {
  audience?: Array<'user' | 'assistant'>;
  priority?: number;
  lastModified?: string;
};

/** One content block of a tool's result, as MCP defines it. */
export type McpContentBlock =
  | { type: 'text'; text: string; annotations?: McpAnnotations; _meta?: { [key: string]: unknown } }
  | { type: 'image'; data: string; mimeType: string; annotations?: McpAnnotations; _meta?: { [key: string]: unknown } }
  | { type: 'audio'; data: string; mimeType: string; annotations?: McpAnnotations; _meta?: { [key: string]: unknown } }
  | {
    type: 'resource_link'; uri: string; name: string; title?: string; description?: string; mimeType?: string;
    annotations?: McpAnnotations; _meta?: { [key: string]: unknown };
  }
  | {
    type: 'resource';
    resource: { uri: string; text: string; mimeType?: string } | { uri: string; blob: string; mimeType?: string };
    annotations?: McpAnnotations; _meta?: { [key: string]: unknown };
  };

/**
 * A tool's answer, as MCP's `CallToolResult`: assignable to the SDKs' own type (v1 and v2). A type
 * alias, not an interface, so it has the implicit index signature the SDKs' types require.
 */
export type CallToolResult = {
  content: McpContentBlock[];
  structuredContent?: { [key: string]: unknown };
  isError?: boolean;
  _meta?: { [key: string]: unknown };
};

/** An MCP server `mcpTurns` accepts: an `McpServer` (v1 or v2, which holds its `server`), or the low-level `Server`. */
export interface McpServerLike {
  /** `McpServer.server`: the low-level `Server` that owns the transport. */
  server?: { readonly transport?: unknown };
  /** The low-level `Server`'s transport: `undefined` once it closed. */
  readonly transport?: unknown;
  connect(transport: never): Promise<void>;
}

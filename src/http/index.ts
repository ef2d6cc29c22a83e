/**
 * `fullstop/http`: fetch-style (`Request` → `Response`) handlers for the event stream of a session
 * and a Stop, for Hono, Next.js route handlers, `Bun.serve`, `Deno.serve`; Node's `http` and
 * Express through `toRequest`/`sendResponse`. It imports no framework (docs/http.md).
 */

export { eventStream, DEFAULT_MAX_BUFFERED_BYTES, DEFAULT_POLL_MS, type EventStreamOptions } from './event-stream.js';
export { stopResponse, STOP_STATUS, DEFAULT_MAX_STOP_BODY_BYTES, type FleetStopper, type StopResponseOptions } from './stop-response.js';
export { turnOptions, type RequestTurnOptions, type TurnOptionsOptions } from './turn-options.js';
export { streamStats, HEARTBEAT_MS, type StreamStats } from './runner-hub.js';
export { StreamDroppedError, ClientGoneError } from './errors.js';
export { toRequest, sendResponse } from './node.js';

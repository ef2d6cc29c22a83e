/**
 * Progress that keeps a long MCP call alive: while a call whose request carried a `progressToken`
 * runs, and until its request is cancelled, a `notifications/progress` every interval, and one
 * with the text of each `turn.say`. A client using `resetTimeoutOnProgress` then does not time
 * the call out (and so does not cancel it).
 *
 * `say` reaches here through the runner's `say` event: one listener a runner while any of its
 * calls with a token runs (an MCP server per request, as in stateless HTTP, adds none of its own).
 */

import type { TurnRunner } from '../turn/runner.js';
import type { McpRequest } from './request.js';
import { follow } from '../turn/routed-events.js';

/**
 * Start the progress of one call (session `sessionId`); returns the function that ends it. Does
 * nothing for a request without a progress token.
 * @param intervalMs the heartbeat's period; 0 sends no heartbeat (a `say` still sends one).
 */
export function startProgress(runner: TurnRunner, sessionId: string, request: McpRequest, intervalMs: number): () => void {
  const progressToken = request.progressToken;
  if (progressToken === undefined) return () => {};
  let progress = 0;
  const send = (message?: string) => {
    progress++;
    void request.notify({
      method: 'notifications/progress',
      params: message === undefined ? { progressToken, progress } : { progressToken, progress, message },
    });
  };
  const timer = intervalMs > 0 ? setInterval(() => send(), intervalMs) : undefined;
  const stopSay = follow(runner, 'say', 'sessionId', sessionId, (e) => send(e.text));
  let ended = false;
  const end = () => {
    if (ended) return;
    ended = true;
    clearInterval(timer);
    stopSay();
    request.signal.removeEventListener('abort', end);
  };
  // A cancelled request (or a closed transport) gets no more progress, though its turn still winds
  // down in its grace: the client has forgotten the token (the v2 client reports each late one as
  // an error), and the v1 SDK drops them itself while the v2 SDK sends them.
  request.signal.addEventListener('abort', end, { once: true });
  return end;
}

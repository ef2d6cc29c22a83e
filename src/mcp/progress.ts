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

type SayListener = (event: { sessionId: string; text: string }) => void;

/** The calls listening for `say`, by runner, then by session id. */
const listeners = new WeakMap<TurnRunner, { readonly calls: Map<string, (text: string) => void>; readonly listener: SayListener }>();

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
  const stopSay = onSay(runner, sessionId, send);
  let ended = false;
  const end = () => {
    if (ended) return; // once: a second stopSay could drop another call's listener entry
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

function onSay(runner: TurnRunner, sessionId: string, send: (text: string) => void): () => void {
  let entry = listeners.get(runner);
  if (entry === undefined) {
    const calls = new Map<string, (text: string) => void>();
    const listener: SayListener = ({ sessionId: id, text }) => calls.get(id)?.(text);
    runner.on('say', listener);
    entry = { calls, listener };
    listeners.set(runner, entry);
  }
  const { calls, listener } = entry;
  calls.set(sessionId, send);
  return () => {
    calls.delete(sessionId);
    if (calls.size === 0) {
      runner.removeListener('say', listener);
      listeners.delete(runner);
    }
  };
}

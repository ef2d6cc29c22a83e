/**
 * Cancels that land where the call does not run: with a fleet, every `notifications/cancelled`
 * a server receives is also sent to the fleet, addressed by the call's address (caller.ts), so the
 * instance that runs the call stops it, whichever instance (or fresh stateless server) got it.
 *
 * 1. The hook is on the transport's `onmessage`, the Transport interface's own callback, wrapped
 *    once the server's `connect` has set it: it sees each message with the transport's `extra`
 *    (headers, auth info), which neither SDK hands a notification handler (v1 hands none). It
 *    reads, never changes or drops, what the SDK gets next.
 * 2. A cancel for a call this very server runs is left to the SDK, which aborts the call's signal
 *    (turns.ts stops it with the reason read from that abort): one stop, not two.
 * 3. The fleet stop names the turn id, so a cancel that overtakes its call (the call's POST still
 *    on its way to another instance) is kept by the fleet and the call starts cancelled. Where that
 *    turn id is long finished (a reused identity: turns.ts then runs the call under a fresh turn
 *    id), the stop goes to the session's running turn instead.
 * 4. Never awaited by the transport, never throws into it: `fleet.stop` answers, it does not reject.
 */

import { addressOf, callerOfMessage, type McpIdentify } from './caller.js';
import { cancelReasonOf } from './request.js';

/** The part of a fleet the cancels use: `Fleet.stop`. */
export interface CancelFleet {
  stop(sessionId: string, options?: { turnId?: string; reason?: string; wait?: boolean }): Promise<{ outcome: string }>;
}

interface TransportLike {
  sessionId?: unknown;
  onmessage?: (message: unknown, extra?: unknown) => void;
}

/**
 * Wrap `server.connect` so that each transport it connects sends its cancels to `fleet`; and the
 * transport it is connected to already, if any (`connected`: the low-level server's `transport`).
 * @param local whether this server itself runs the call with that address (invariant 2).
 */
export function watchCancels(
  server: { connect(transport: never): Promise<void> },
  connected: unknown,
  fleet: CancelFleet,
  identify: McpIdentify,
  local: (sessionId: string) => boolean,
): void {
  const connect = server.connect;
  const wrapped = async function (this: unknown, transport: TransportLike): Promise<void> {
    await (connect as (t: TransportLike) => Promise<void>).call(this, transport);
    hook(transport);
  };
  (server as { connect: unknown }).connect = wrapped;
  if (connected !== null && typeof connected === 'object') hook(connected as TransportLike);

  function hook(transport: TransportLike): void {
    const next = transport.onmessage;
    if (next === undefined) return;
    transport.onmessage = (message, extra) => {
      onCancel(message, extra, transport);
      next.call(transport, message, extra);
    };
  }

  function onCancel(message: unknown, extra: unknown, transport: TransportLike): void {
    const m = message as { method?: unknown; id?: unknown; params?: { requestId?: unknown; reason?: unknown } } | null;
    if (m === null || typeof m !== 'object' || m.method !== 'notifications/cancelled' || m.id !== undefined) return;
    const requestId = m.params?.requestId;
    if (typeof requestId !== 'string' && typeof requestId !== 'number') return;
    let identity: string | undefined;
    try {
      identity = identify(callerOfMessage(extra, transport.sessionId));
    } catch {
      return; // the host's identify failed for this message: it names no call
    }
    if (typeof identity !== 'string' || identity === '') return;
    const { sessionId, turnId } = addressOf(identity, requestId);
    if (local(sessionId)) return; // invariant 2
    const reason = cancelReasonOf(m.params?.reason);
    void fleet.stop(sessionId, { turnId, reason, wait: false }).then((answer) => {
      // Invariant 3: the addressed turn id is an old call's; this call runs under a fresh one.
      if (answer.outcome === 'already_finished') return fleet.stop(sessionId, { reason, wait: false });
      return undefined;
    }).catch(() => {});
  }
}

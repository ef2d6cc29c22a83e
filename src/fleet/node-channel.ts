/**
 * A node's channel: the one connection a fleet member keeps besides its caller's client, a
 * `duplicate()` of it subscribed to `nodeChannel(nodeId)` (a subscribed connection can do nothing
 * else), where the scripts publish what is for this node: stops of its turns, answers to its
 * questions, and the acknowledgements of its own stops and answers. `Fleet` and `FleetClient` each
 * open one.
 */
import { duplicateSubscriber, ensureConnecting, type FleetRedisClient } from './client.js';
import type { FleetKeys } from './keys.js';
import { waitAtMost } from '../base/within.js';

export class NodeChannel {
  /** `CLIENT SETNAME` of the connection, to find it in `CLIENT LIST` (single-node clients only). */
  readonly name: string;
  readonly #sub: FleetRedisClient;
  readonly #subscribed: Promise<unknown>;
  readonly #commandTimeoutMs: number;
  readonly #onError = () => { /* the client reconnects by itself; a request meanwhile fails fast */ };

  /** Starts connecting and subscribing at once; `closed()` ends a cluster client's reconnect loop. */
  constructor(redis: FleetRedisClient, keys: FleetKeys, nodeId: string, name: string, onMessage: (raw: string) => void, closed: () => boolean, commandTimeoutMs: number) {
    this.name = name;
    this.#commandTimeoutMs = commandTimeoutMs;
    this.#sub = duplicateSubscriber(redis, name);
    this.#sub.on('error', this.#onError);
    this.#subscribed = ensureConnecting(this.#sub, closed).then(() => this.#sub.subscribe(keys.nodeChannel(nodeId), onMessage));
    this.#subscribed.catch(() => { /* closed before Redis came back */ });
  }

  /**
   * Resolves once subscribed, or — while Redis is unreachable — after the first connection error
   * or `commandTimeoutMs` (the connection keeps trying meanwhile).
   */
  async ready(): Promise<void> {
    let onError: (() => void) | undefined;
    await waitAtMost(Promise.race([
      this.#subscribed,
      new Promise<void>((resolve) => { onError = resolve; this.#sub.on('error', resolve); }),
    ]), this.#commandTimeoutMs);
    this.#sub.off('error', onError!);
  }

  /** Unsubscribe (within `commandTimeoutMs`) and close the connection. */
  async close(): Promise<void> {
    if (this.#sub.isReady) await waitAtMost(this.#sub.unsubscribe(), this.#commandTimeoutMs);
    this.#sub.destroy();
    this.#sub.off('error', this.#onError);
  }

  /** The connection is open (for leak checks). */
  get isOpen(): boolean { return this.#sub.isOpen; }
}

/**
 * Who may talk to the server. The server has no users, so the threats are other web pages in the
 * user's own browser: a page on any origin can send a no-cors `text/plain` POST (start or stop a
 * turn, spend the model key), and a page on a rebound DNS name reaches the server with a foreign
 * `Host` and can read what it answers (history, the event stream and its question ids). Every
 * request passes `RequestGuard.check` before it is routed:
 *
 * 1. `Host` must be one of the allowed hosts (421 otherwise): defeats DNS rebinding.
 * 2. An `Origin` header, when present, must name this server's own host (403): a browser sends one
 *    on every cross-origin request and on every POST, so no other site's page gets through, while
 *    curl and other non-browser clients (which send none) still work.
 * 3. A POST must be `Content-Type: application/json` (415): that type cannot be sent cross-site
 *    without a CORS preflight, which this server never grants.
 * 4. With a token configured, every API request must carry `Authorization: Bearer <token>` (401).
 *    The page's own files are served without it: a browser navigating to the page cannot send a
 *    header, and the files hold no data.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { HttpError } from './http.js';

/** Paths served without a token: the page's static files (no data in them). */
const PUBLIC_PATHS = new Set(['/', '/index.html', '/app.js', '/style.css']);

/** What the guard checks against; see `RequestGuard`. */
export interface GuardOptions {
  /**
   * Hosts (`name` or `name:port`, as a `Host` header says them) allowed besides the defaults: the
   * address the server is bound to and the loopback names `localhost`, `127.0.0.1` and `[::1]`,
   * each with the server's port. A name given without a port is allowed on any port.
   */
  allowedHosts: readonly string[];
  /** When set, every API request must carry `Authorization: Bearer <token>`. */
  token?: string;
}

/** The checks every request passes before it is routed (see the file comment for why each). */
export class RequestGuard {
  readonly #extraHosts: readonly string[];
  /** The allowed `Host` values; `undefined` until `listening` tells the port. */
  #hosts: Set<string> | undefined;
  /** SHA-256 of the token: compared in constant time, whatever the length sent. */
  readonly #tokenDigest: Buffer | undefined;

  constructor(options: GuardOptions) {
    this.#extraHosts = options.allowedHosts.map((h) => h.toLowerCase());
    this.#tokenDigest = options.token === undefined ? undefined : digest(options.token);
  }

  /** The server listens on `host`:`port`: the default allowed hosts follow from them. */
  listening(host: string, port: number): void {
    const bound = host.includes(':') ? `[${host}]` : host;
    this.#hosts = new Set([bound, 'localhost', '127.0.0.1', '[::1]'].map((name) => `${name.toLowerCase()}:${port}`));
    for (const extra of this.#extraHosts) this.#hosts.add(extra);
  }

  /** Throws the `HttpError` that refuses `req`, or returns when it may be routed. */
  check(req: IncomingMessage, path: string): void {
    const host = (req.headers.host ?? '').toLowerCase();
    if (!this.#hostAllowed(host)) {
      throw new HttpError(421, `Host: ${JSON.stringify(host.slice(0, 100))} is not this server's (start it with --allowed-hosts to add a name)`);
    }
    const origin = req.headers.origin;
    if (origin !== undefined && originHost(origin) !== host) {
      throw new HttpError(403, `Origin: ${JSON.stringify(origin.slice(0, 100))} is not this server's origin; cross-site requests are refused`);
    }
    if (req.method === 'POST' && !/^application\/json\s*(;|$)/i.test(req.headers['content-type'] ?? '')) {
      throw new HttpError(415, `Content-Type: expected application/json, got ${JSON.stringify(req.headers['content-type'] ?? 'nothing')}`);
    }
    if (this.#tokenDigest !== undefined && !PUBLIC_PATHS.has(path) && !this.#tokenMatches(req.headers.authorization)) {
      throw new HttpError(401, 'Authorization: expected "Bearer <token>" with the token the server was started with');
    }
  }

  #hostAllowed(host: string): boolean {
    if (this.#hosts === undefined || host === '') return false;
    if (this.#hosts.has(host)) return true;
    // A name allowed without a port matches it on any port.
    const name = host.startsWith('[') ? host.slice(0, host.indexOf(']') + 1) : host.split(':')[0];
    return this.#hosts.has(name);
  }

  #tokenMatches(header: string | undefined): boolean {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header ?? '');
    return match !== null && timingSafeEqual(digest(match[1]), this.#tokenDigest!);
  }
}

function digest(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}

/** The `host[:port]` of an Origin header, lower case; `undefined` for `null` or anything not http(s). */
function originHost(origin: string): string | undefined {
  try {
    const url = new URL(origin);
    return url.protocol === 'http:' || url.protocol === 'https:' ? url.host.toLowerCase() : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Node's `http` (and Express, which is built on it) through the fetch-style functions:
 * `toRequest(req, res)` makes the Fetch `Request` (its `signal` aborts when the client goes away
 * before the response is done) and `sendResponse(res, response)` writes a `Response` back,
 * streaming its body as the client reads it (a write that fills the socket waits for `drain`)
 * and cancelling the body when the client goes away.
 */

import type { IncomingMessage, ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import { ClientGoneError } from './errors.js';


/**
 * The Fetch `Request` of a Node request. Its URL is built from `Host` (the scheme from the socket:
 * `https` on TLS); its body streams from `req`, except that a body Express already parsed
 * (`req.body` set by `express.json()`) is given as that JSON. Its `signal` aborts (a
 * `ClientGoneError`) when the connection closes before `res` has finished.
 *
 * @example
 * http.createServer(async (req, res) => sendResponse(res, await app.fetch(toRequest(req, res))));
 */
export function toRequest(req: IncomingMessage, res: ServerResponse): Request {
  const controller = new AbortController();
  const gone = () => {
    if (!res.writableFinished) controller.abort(new ClientGoneError('the client closed the connection before the response was done'));
  };
  res.once('close', gone);
  const headers = new Headers();
  for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) {
    if (!req.rawHeaders[i].startsWith(':')) headers.append(req.rawHeaders[i], req.rawHeaders[i + 1]);
  }
  const url = requestUrl(req);
  const method = req.method ?? 'GET';
  const init: RequestInit & { duplex?: 'half' } = { method, headers, signal: controller.signal };
  if (method !== 'GET' && method !== 'HEAD') {
    const parsed = (req as { body?: unknown }).body;
    if (parsed !== undefined && req.readableEnded) {
      init.body = typeof parsed === 'string' ? parsed : JSON.stringify(parsed);
      headers.delete('content-length');
    } else {
      init.body = Readable.toWeb(req) as ReadableStream<Uint8Array>;
      init.duplex = 'half'; // a streamed request body (Node's fetch requires saying so)
    }
  }
  return new Request(url, init);
}

/**
 * The request's URL: its path under `Host` (the scheme from the socket), or its absolute-form
 * target as sent to a proxy. Never throws: a `Host` no URL can hold (a client's to choose) gives
 * `localhost` with the same path; the `Host` header is still in the headers for the app to refuse.
 */
function requestUrl(req: IncomingMessage): URL {
  const scheme = (req.socket as { encrypted?: boolean }).encrypted === true ? 'https' : 'http';
  const target = req.url ?? '/';
  const path = target.startsWith('/') ? target : '/';
  try {
    // Concatenated, not resolved: a path of `//other.example/x` stays a path of this host.
    return target.startsWith('/') ? new URL(`${scheme}://${req.headers.host ?? 'localhost'}${target}`) : new URL(target);
  } catch {
    try {
      return new URL(`${scheme}://localhost${path}`);
    } catch {
      return new URL(`${scheme}://localhost/`);
    }
  }
}

/**
 * Writes `response` to `res`: status, headers (each `set-cookie` apart), then the body as it
 * comes, waiting for `drain` when the socket is full. Resolves once the response is done or the
 * client went away (then the body is cancelled, which ends an `eventStream`). A body that errors
 * (a stream dropped for not reading) destroys the connection.
 */
export async function sendResponse(res: ServerResponse, response: Response): Promise<void> {
  const headers: Record<string, string | string[]> = {};
  response.headers.forEach((value, name) => { if (name !== 'set-cookie') headers[name] = value; });
  const cookies = response.headers.getSetCookie();
  if (cookies.length > 0) headers['set-cookie'] = cookies;
  res.writeHead(response.status, response.statusText, headers);
  if (response.body === null) {
    res.end();
    return;
  }
  res.flushHeaders(); // the client has the status before the first event (an idle stream may have none for long)
  const reader = response.body.getReader();
  const closed = new Promise<'closed'>((resolve) => res.once('close', () => resolve('closed')));
  void closed.then(() => reader.cancel().catch(() => {}));
  try {
    for (;;) {
      const next = await Promise.race([reader.read(), closed]);
      if (next === 'closed') return;
      if (next.done) break;
      if (!res.write(next.value)) {
        const drained = await Promise.race([new Promise<'drain'>((resolve) => res.once('drain', () => resolve('drain'))), closed]);
        if (drained === 'closed') return;
      }
    }
    res.end();
  } catch {
    res.destroy();
  }
}

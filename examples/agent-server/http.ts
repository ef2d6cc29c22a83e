/**
 * The HTTP plumbing the server needs and nothing more: JSON bodies with a size limit, JSON
 * answers, and `HttpError`, the one way a handler refuses a request (a 4xx with `{ error }`).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';

/** A refusal: `status` (4xx) and a message that names the field at fault. */
export class HttpError extends Error {
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.name = 'HttpError';
    this.status = status;
  }
}

/** Largest request body read, in bytes. */
export const MAX_BODY_BYTES = 64 * 1024;

/**
 * How much of a refused body is read and discarded after its 413 (`discardBody`), in bytes and in
 * ms: enough for a client that sends a big body whole to finish and read the answer, while one
 * whose body never ends is cut off.
 */
export const DISCARD_MAX_BYTES = 16 * 1024 * 1024;
export const DISCARD_MAX_MS = 10_000;

/**
 * Reads a JSON object body. An empty body is `{}`. Refuses a body over `MAX_BODY_BYTES` (413, as
 * soon as it is known, without reading the rest: the caller answers, then `discardBody`), bad JSON
 * (400) and a non-object (400).
 */
export async function readJson(req: IncomingMessage): Promise<Record<string, unknown>> {
  const declared = Number(req.headers['content-length']);
  if (declared > MAX_BODY_BYTES) throw new HttpError(413, `request body: over ${MAX_BODY_BYTES} bytes (content-length ${declared})`);
  const chunks: Buffer[] = [];
  let size = 0;
  // Leaving the loop early must not destroy the request: that resets the connection under a
  // client still writing, which then never reads the 413.
  for await (const chunk of req.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) throw new HttpError(413, `request body: over ${MAX_BODY_BYTES} bytes`);
    chunks.push(chunk);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  if (text.trim() === '') return {};
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch (error) {
    throw new HttpError(400, `request body: invalid JSON (${(error as Error).message})`);
  }
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw new HttpError(400, `request body: expected a JSON object, got ${Array.isArray(body) ? 'an array' : JSON.stringify(body)}`);
  }
  return body as Record<string, unknown>;
}

/**
 * Reads and drops what is left of a request body the server has answered without reading (a
 * 413), so that a client still sending it can finish and read the answer: closing the connection
 * under it instead resets it, and the client sees a network error (EPIPE), not the refusal. Past
 * `DISCARD_MAX_BYTES` or `DISCARD_MAX_MS` the connection is cut. A body read to its end leaves the
 * connection open for the client's next request.
 */
export function discardBody(req: IncomingMessage): void {
  if (req.complete || req.destroyed) return;
  let left = DISCARD_MAX_BYTES;
  const cut = () => req.socket.destroy();
  const timer = setTimeout(cut, DISCARD_MAX_MS).unref();
  const done = () => clearTimeout(timer);
  req.on('data', (chunk: Buffer) => {
    left -= chunk.length;
    if (left < 0) cut();
  });
  req.once('end', done);
  req.once('close', done);
  req.resume();
}

/** Sends `body` as JSON with `status`; never cached. */
export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text), 'cache-control': 'no-store' });
  res.end(text);
}

/** A string field of a body: required or not, non-empty, at most `max` characters. */
export function stringField(body: Record<string, unknown>, field: string, max: number, required: boolean): string | undefined {
  const value = body[field];
  if (value === undefined && !required) return undefined;
  if (typeof value !== 'string') throw new HttpError(400, `${field}: expected a string, got ${value === undefined ? 'nothing' : JSON.stringify(value)}`);
  if (value.trim() === '') throw new HttpError(400, `${field}: expected a non-empty string`);
  if (value.length > max) throw new HttpError(413, `${field}: over ${max} characters (got ${value.length})`);
  return value;
}

/** Session and question ids in a path: letters, digits, `-`, `_`, `.`, `:`, 1–100 of them. */
export function idParam(name: string, raw: string): string {
  let id: string;
  try {
    id = decodeURIComponent(raw);
  } catch {
    throw new HttpError(400, `${name}: not a valid URL component`);
  }
  if (!/^[\w.:-]{1,100}$/.test(id)) throw new HttpError(400, `${name}: expected 1-100 letters, digits, '-', '_', '.' or ':', got ${JSON.stringify(id.slice(0, 120))}`);
  return id;
}

/** Refuses (405) a method the route does not take. */
export function only(method: string, allowed: string, path: string): void {
  if (method !== allowed) throw new HttpError(405, `method: ${path} takes ${allowed}, not ${method}`);
}

/** An error as one line of text for a client. */
export function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

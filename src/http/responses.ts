/** The JSON answers of `fullstop/http` and the checks of its arguments. */

import { describe } from '../errors.js';
import { errorsAsText } from './frames.js';

/** A JSON `Response` (`Error` values as their message); never cached. */
export function jsonResponse(status: number, body: object, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body, errorsAsText), {
    status,
    headers: { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store', ...headers },
  });
}

/** `request` must look like a Fetch `Request` (checked by shape: a framework's may be another realm's class). */
export function checkRequest(where: string, request: unknown): asserts request is Request {
  const r = request as Partial<Request> | null;
  if (r === null || typeof r !== 'object' || typeof r.headers?.get !== 'function' || typeof r.signal?.addEventListener !== 'function') {
    throw new TypeError(`${where}: request: expected a Fetch Request, got ${describe(request)}`);
  }
}

/** `name` must be a positive safe integer (a count of bytes), or undefined for the default. */
export function checkBytes(name: string, value: unknown, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number') throw new TypeError(`${name}: expected a number of bytes, got ${describe(value)}`);
  if (!Number.isSafeInteger(value) || value < 1) throw new RangeError(`${name}: expected a positive integer of bytes, got ${describe(value)}`);
  return value;
}

/**
 * A request's JSON body, read to a bound in bytes: a `content-length` over it is refused before a
 * byte is read, and a body without one is read only up to the bound (then cancelled).
 */

import { BodyRefusal } from './errors.js';

/** The body as JSON; an empty body is `undefined`. Rejects with a `BodyRefusal`. */
export async function readJsonBody(request: Request, maxBytes: number): Promise<unknown> {
  const declared = Number(request.headers.get('content-length') ?? NaN);
  if (declared > maxBytes) throw tooLarge(maxBytes);
  const text = await readText(request, maxBytes);
  if (text.trim() === '') return undefined;
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new BodyRefusal(400, `request body: invalid JSON (${(error as Error).message})`);
  }
}

async function readText(request: Request, maxBytes: number): Promise<string> {
  if (request.body === null) return '';
  const reader = request.body.getReader();
  const chunks: Uint8Array[] = [];
  let bytes = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    bytes += value.byteLength;
    if (bytes > maxBytes) {
      void reader.cancel().catch(() => {});
      throw tooLarge(maxBytes);
    }
    chunks.push(value);
  }
  const all = new Uint8Array(bytes);
  let at = 0;
  for (const chunk of chunks) {
    all.set(chunk, at);
    at += chunk.byteLength;
  }
  return new TextDecoder().decode(all);
}

function tooLarge(maxBytes: number): BodyRefusal {
  return new BodyRefusal(413, `request body: over ${maxBytes} bytes`);
}

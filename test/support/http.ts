/**
 * For the `fullstop/http` specs: a Node http server on an ephemeral loopback port that serves a
 * fetch handler through `toRequest`/`sendResponse`, and a reader of a Server-Sent Events response.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { sendResponse, toRequest } from '../../dist/src/http/index.js';

export interface Served {
  url: string;
  server: Server;
  close(): Promise<void>;
}

/** Serves `handler` (a `fetch`: Hono's `app.fetch`, or a plain function) on 127.0.0.1. */
export async function serve(handler: (request: Request) => Response | Promise<Response>): Promise<Served> {
  const server = createServer((req, res) => {
    void (async () => {
      try {
        await sendResponse(res, await handler(toRequest(req, res)));
      } catch (error) {
        res.destroy(error as Error);
      }
    })();
  });
  server.maxConnections = 5000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    server,
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}

/** One event as the client parsed it. */
export interface SseEvent {
  id?: string;
  event: string;
  data: any;
}

/** Reads the SSE frames of `response` as they come. */
export class SseReader {
  readonly events: SseEvent[] = [];
  #buffer = '';
  #waiters: (() => void)[] = [];
  ended = false;
  error: unknown;

  constructor(response: Response) {
    void this.#read(response);
  }

  async #read(response: Response): Promise<void> {
    const decoder = new TextDecoder();
    try {
      for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
        this.#buffer += decoder.decode(chunk, { stream: true });
        let cut: number;
        while ((cut = this.#buffer.indexOf('\n\n')) !== -1) {
          const frame = this.#buffer.slice(0, cut);
          this.#buffer = this.#buffer.slice(cut + 2);
          const event: SseEvent = { event: 'message', data: undefined };
          let comment = true;
          for (const line of frame.split('\n')) {
            if (line.startsWith(':')) continue;
            comment = false;
            const colon = line.indexOf(': ');
            const [field, value] = [line.slice(0, colon), line.slice(colon + 2)];
            if (field === 'id') event.id = value;
            else if (field === 'event') event.event = value;
            else if (field === 'data') event.data = JSON.parse(value);
          }
          if (!comment) this.events.push(event);
        }
        this.#wake();
      }
    } catch (error) {
      this.error = error;
    }
    this.ended = true;
    this.#wake();
  }

  #wake(): void {
    for (const waiter of this.#waiters.splice(0)) waiter();
  }

  /** Resolves once `check(events)` holds; rejects after `ms` (a liveness bound) or at the end of the stream. */
  async until(check: (events: SseEvent[]) => boolean, ms = 10_000, what = 'events'): Promise<void> {
    const deadline = Date.now() + ms;
    while (!check(this.events)) {
      if (this.ended) throw new Error(`the stream ended before ${what} (${this.events.length} events)`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out after ${ms} ms waiting for ${what} (${this.events.length} events: ${JSON.stringify(this.events.slice(-3))})`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.#waiters.push(() => { clearTimeout(timer); resolve(); });
      });
    }
  }
}

/**
 * A load balancer without sticky sessions, as the browser tests need one: a node HTTP proxy that
 * sends each request to the next upstream in turn (round robin), streams answers through as they
 * come (Server-Sent Events included), and logs which upstream served which request.
 */
import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Routed {
  method: string;
  path: string;
  /** Index of the upstream that served it. */
  upstream: number;
}

export class RoundRobin {
  readonly #server: Server;
  readonly #upstreams: URL[];
  readonly log: Routed[] = [];
  /** Answers being streamed now (an event stream stays here while it is open). */
  readonly #open = new Set<ServerResponse>();
  #next = 0;
  #waiters: (() => void)[] = [];

  private constructor(server: Server, upstreams: URL[]) {
    this.#server = server;
    this.#upstreams = upstreams;
  }

  static async start(upstreams: string[]): Promise<RoundRobin> {
    let proxy!: RoundRobin;
    const server = createServer((req, res) => proxy.#forward(req, res));
    proxy = new RoundRobin(server, upstreams.map((u) => new URL(u)));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return proxy;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}/`;
  }

  /** The upstream the next request goes to. */
  get next(): number {
    return this.#next % this.#upstreams.length;
  }

  /**
   * Makes `upstream` the next one by sending requests of another client (`GET /healthz`) until it
   * is: what other users' traffic does behind a real balancer.
   */
  async align(upstream: number): Promise<void> {
    while (this.next !== upstream) await (await fetch(new URL('/healthz', this.url))).arrayBuffer();
  }

  /** The first logged request at index >= `from` that matches; waits up to `ms` for it. */
  async request(match: (r: Routed) => boolean, from = 0, ms = 10_000): Promise<Routed> {
    const deadline = Date.now() + ms;
    for (;;) {
      const found = this.log.slice(from).find(match);
      if (found !== undefined) return found;
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no such request within ${ms} ms; got ${JSON.stringify(this.log)}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.#waiters.push(() => { clearTimeout(timer); resolve(); });
      });
    }
  }

  /** Drops every answer being streamed now (the page's event stream): its client reconnects. */
  cutStreams(): void {
    for (const res of this.#open) res.destroy();
  }

  async close(): Promise<void> {
    this.cutStreams();
    this.#server.closeAllConnections();
    await new Promise((resolve) => this.#server.close(resolve));
  }

  #forward(req: IncomingMessage, res: ServerResponse): void {
    const upstream = this.next;
    this.#next++;
    this.log.push({ method: req.method ?? 'GET', path: req.url ?? '/', upstream });
    for (const wake of this.#waiters.splice(0)) wake();
    const target = this.#upstreams[upstream];
    const out = request({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      res.flushHeaders();
      this.#open.add(res);
      res.once('close', () => { this.#open.delete(res); answer.destroy(); });
      answer.pipe(res);
    });
    out.on('error', () => res.destroy());
    req.pipe(out);
  }
}

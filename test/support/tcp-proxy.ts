/**
 * A TCP proxy on loopback that a test can break on purpose, to fake a server going away without
 * touching the real one (the Redis on this machine is shared by every suite):
 * `refuse()` drops every connection and refuses new ones (the server is down); `cut()` drops the
 * connections it has but keeps accepting (a network blip); `hang()` keeps connections open but
 * forwards nothing (a partition); `deaf()` forwards what clients send but drops what the server
 * answers, calling `onDropped` (a reply lost on the way back); `pass()` restores it. `blockName` closes at once any connection
 * whose traffic names that client (its CLIENT SETNAME), so it cannot reconnect. `latencyMs` delays
 * what the client sends (in order), for a slow link.
 */
import { connect, createServer, type Server, type Socket } from 'node:net';

export class TcpProxy {
  readonly #server: Server;
  readonly #pairs = new Set<[Socket, Socket]>();
  mode: 'pass' | 'refuse' | 'hang' | 'deaf' = 'pass';
  /** Called with each chunk of a server's answer dropped in `deaf` mode. */
  onDropped: ((chunk: Buffer) => void) | undefined;
  blockName: string | undefined;
  /** Delay of everything the client sends, in ms (0: forwarded at once). */
  latencyMs = 0;
  /** The proxy's own port (0 until started). */
  port = 0;
  /** Connections accepted so far. */
  connections = 0;

  private constructor(target: number) {
    this.#server = createServer((down) => {
      if (this.mode === 'refuse') return void down.destroy();
      this.connections++;
      const up = connect({ host: '127.0.0.1', port: target });
      const pair: [Socket, Socket] = [down, up];
      this.#pairs.add(pair);
      const end = () => { down.destroy(); up.destroy(); this.#pairs.delete(pair); };
      down.on('data', (d) => {
        if (this.blockName !== undefined && String(d).includes(this.blockName)) return end();
        if (this.mode !== 'pass' && this.mode !== 'deaf') return;
        if (this.latencyMs > 0) setTimeout(() => { if (this.mode === 'pass' || this.mode === 'deaf') up.write(d); }, this.latencyMs);
        else up.write(d);
      });
      up.on('data', (d) => {
        if (this.mode === 'pass') down.write(d);
        else if (this.mode === 'deaf') this.onDropped?.(d);
      });
      down.on('error', end).on('close', end);
      up.on('error', end).on('close', end);
    });
  }

  /** A proxy to 127.0.0.1:`target`, listening on a free port. */
  static async start(target: number): Promise<TcpProxy> {
    const proxy = new TcpProxy(target);
    await new Promise<void>((resolve) => proxy.#server.listen(0, '127.0.0.1', resolve));
    proxy.port = (proxy.#server.address() as { port: number }).port;
    return proxy;
  }

  cut(): void {
    for (const [down, up] of this.#pairs) { down.destroy(); up.destroy(); }
    this.#pairs.clear();
  }

  refuse(): void {
    this.mode = 'refuse';
    this.cut();
  }

  hang(): void { this.mode = 'hang'; }
  deaf(): void { this.mode = 'deaf'; }
  pass(): void { this.mode = 'pass'; }

  async close(): Promise<void> {
    this.refuse();
    await new Promise((resolve) => this.#server.close(resolve));
  }
}

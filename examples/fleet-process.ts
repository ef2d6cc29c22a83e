/**
 * The parent's side of examples/fleet-host.ts: start an instance in its own process and wait for
 * the messages it sends (handshakes, never sleeps).
 */
import { fork, type ChildProcess } from 'node:child_process';
import { connect } from 'node:net';

export type HostMessage = Record<string, any> & { type: string; at: number };

export class FleetHostProcess {
  readonly child: ChildProcess;
  readonly #messages: HostMessage[] = [];
  readonly #listeners = new Set<() => void>();
  readonly exited: Promise<void>;

  constructor(config: Record<string, unknown>) {
    const host = new URL('./fleet-host.js', import.meta.url).pathname;
    this.child = fork(host, [JSON.stringify(config)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    this.child.on('message', (m) => { this.#messages.push(m as HostMessage); this.#notify(); });
    this.exited = new Promise((resolve) => this.child.once('exit', () => { this.#notify(); resolve(); }));
  }

  #notify(): void { for (const l of [...this.#listeners]) l(); }

  send(message: Record<string, unknown>): void { this.child.send(message); }

  /** The first message (from now on, or kept since `from`) matching `predicate`; rejects after `ms` or on exit. */
  next(predicate: (m: HostMessage) => boolean, ms = 10_000): Promise<HostMessage> {
    return new Promise((resolve, reject) => {
      const check = () => {
        const i = this.#messages.findIndex(predicate);
        if (i >= 0) { done(); resolve(this.#messages.splice(i, 1)[0]!); return; }
        if (this.child.exitCode !== null || this.child.signalCode !== null) { done(); reject(new Error('the instance process exited')); }
      };
      const timer = setTimeout(() => { done(); reject(new Error(`no message from the instance within ${ms} ms`)); }, ms);
      const done = () => { clearTimeout(timer); this.#listeners.delete(check); };
      this.#listeners.add(check);
      check();
    });
  }

  /** Ask it to leave the fleet and exit; SIGKILL if it has not within `ms`. */
  async close(ms = 5000): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    if (this.child.connected) this.send({ cmd: 'close' });
    const timer = setTimeout(() => this.child.kill('SIGKILL'), ms);
    await this.exited;
    clearTimeout(timer);
  }

  async kill(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGKILL');
    await this.exited;
  }
}

/** True when Redis answers PING at 127.0.0.1:`port` within `ms`. */
export function redisAnswers(port = 6379, ms = 1000): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    const done = (ok: boolean) => { socket.destroy(); resolve(ok); };
    socket.setTimeout(ms, () => done(false));
    socket.once('error', () => done(false));
    socket.once('connect', () => socket.write('PING\r\n'));
    socket.once('data', (d) => done(String(d).startsWith('+PONG')));
  });
}

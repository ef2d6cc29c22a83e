/**
 * The agent server as the tests run it: a real process (dist/examples/agent-server/main.js) on an
 * ephemeral port, its URL read from its first line, plus a small Server-Sent Events reader. Shared
 * by the API tests (test/agent-server*.test.ts) and the browser tests.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const MAIN = fileURLToPath(new URL('../../dist/examples/agent-server/main.js', import.meta.url));

/** The live processes the server's tools started (exec's reaper and its helpers left out). */
export { toolTree } from '../support/leaks.js';

export class ServerProcess {
  readonly child: ChildProcess;
  readonly url: string;
  output = '';
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;

  private constructor(child: ChildProcess, url: string, output: string, exited: ServerProcess['exited']) {
    this.child = child;
    this.url = url;
    this.output = output;
    this.exited = exited;
  }

  /**
   * Starts the server with `--port 0` and `args`; resolves once it printed its URL. `fdLimit`
   * raises its open-file limit (through the shell's `ulimit`, which keeps the pid) for tests that
   * hold thousands of connections.
   */
  static start(args: string[] = [], env: NodeJS.ProcessEnv = {}, fdLimit?: number): Promise<ServerProcess> {
    // A ledger folder of its own unless the test brings one (or the history is in PostgreSQL);
    // removed once the server has exited.
    const data = args.includes('--data') || args.includes('--postgres') ? undefined : mkdtempSync(join(tmpdir(), 'fullstop-server-test-'));
    const argv = [MAIN, '--port', '0', ...(data === undefined ? [] : ['--data', data]), ...args];
    const child = fdLimit === undefined
      ? spawn(process.execPath, argv, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
      : spawn('sh', ['-c', `ulimit -n ${fdLimit} && exec "$0" "$@"`, process.execPath, ...argv], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
      child.once('exit', (code, signal) => {
        if (data !== undefined) rmSync(data, { recursive: true, force: true });
        resolve({ code, signal });
      });
    });
    let output = '';
    return new Promise((resolve, reject) => {
      let server: ServerProcess | undefined;
      const onData = (chunk: Buffer) => {
        output += chunk.toString();
        if (server !== undefined) server.output = output;
        const match = /agent server: (http:\/\/\S+)/.exec(output);
        if (server === undefined && match !== null) {
          server = new ServerProcess(child, match[1], output, exited);
          resolve(server);
        }
      };
      child.stdout!.on('data', onData);
      child.stderr!.on('data', onData);
      void exited.then(({ code }) => { if (server === undefined) reject(new Error(`server exited (${code}) before printing its URL:\n${output}`)); });
    });
  }

  get pid(): number { return this.child.pid!; }

  /** The bearer token the server printed in its URL (`#token=`), if any. */
  get token(): string | undefined {
    return new URLSearchParams(new URL(this.url).hash.slice(1)).get('token') ?? undefined;
  }

  /** The `authorization` header for the printed token (none without one). */
  get authorization(): Record<string, string> {
    return this.token === undefined ? {} : { authorization: `Bearer ${this.token}` };
  }

  async get(path: string): Promise<{ status: number; body: any }> {
    const res = await fetch(new URL(path, this.url), { headers: this.authorization });
    return { status: res.status, body: await res.json() };
  }

  /** POST with a JSON body (a string is sent as is, for malformed bodies). */
  async post(path: string, body?: unknown): Promise<{ status: number; body: any }> {
    const res = await fetch(new URL(path, this.url), {
      method: 'POST',
      headers: { ...this.authorization, 'content-type': 'application/json' },
      body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    });
    return { status: res.status, body: await res.json() };
  }

  /** Follows a session's event stream. */
  events(sessionId: string, lastEventId?: number | string): Promise<EventStream> {
    return EventStream.open(new URL(`/api/sessions/${sessionId}/events`, this.url), lastEventId, this.authorization);
  }

  /** SIGTERM, then waits for the exit. */
  async terminate(): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGTERM');
    return this.exited;
  }
}

export interface SseEvent {
  /** The id as a number (the in-memory log's ids; NaN for a Redis stream id). */
  id: number;
  /** The id as sent (a Redis stream id with `--postgres`). */
  rawId: string;
  type: string;
  data: any;
}

/** Reads an SSE response into `events`; `next` waits for the first event (from `from`) that matches. */
export class EventStream {
  readonly events: SseEvent[] = [];
  readonly #abort = new AbortController();
  #waiters: (() => void)[] = [];
  #ended = false;

  static async open(url: URL, lastEventId?: number | string, headers: Record<string, string> = {}): Promise<EventStream> {
    const stream = new EventStream();
    const res = await fetch(url, {
      headers: lastEventId === undefined ? headers : { ...headers, 'last-event-id': String(lastEventId) },
      signal: stream.#abort.signal,
    });
    if (res.status !== 200) throw new Error(`events: HTTP ${res.status} ${await res.text()}`);
    void stream.#read(res.body!);
    return stream;
  }

  async #read(body: ReadableStream<Uint8Array>): Promise<void> {
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for await (const chunk of body as unknown as AsyncIterable<Uint8Array>) {
        buffer += decoder.decode(chunk, { stream: true });
        let end: number;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const frame = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const fields = Object.fromEntries(frame.split('\n').filter((l) => !l.startsWith(':') && l.includes(': '))
            .map((l) => [l.slice(0, l.indexOf(': ')), l.slice(l.indexOf(': ') + 2)]));
          if (fields.event !== undefined) this.events.push({ id: Number(fields.id), rawId: fields.id, type: fields.event, data: JSON.parse(fields.data) });
        }
        this.#wake();
      }
    } catch {
      // aborted by close()
    }
    this.#ended = true;
    this.#wake();
  }

  #wake(): void {
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const wake of waiters) wake();
  }

  /** The first event of `type` (and matching `where`) at index >= `from`; rejects after `ms`. */
  async next(type: string, where: (e: SseEvent) => boolean = () => true, ms = 20_000, from = 0): Promise<SseEvent> {
    const deadline = Date.now() + ms;
    for (;;) {
      const found = this.events.slice(from).find((e) => e.type === type && where(e));
      if (found !== undefined) return found;
      if (this.#ended) throw new Error(`event stream ended without a ${type} event; got ${this.types()}`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no ${type} event within ${ms} ms; got ${this.types()}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.#waiters.push(() => { clearTimeout(timer); resolve(); });
      });
    }
  }

  types(): string {
    return this.events.map((e) => e.type).join(', ') || 'none';
  }

  close(): void {
    this.#abort.abort();
  }
}

/**
 * A refused request body is answered, not cut: a client sending a body over the limit reads the
 * 413 (its connection is not reset while it still writes), and a client whose body never ends is
 * still cut off once the server has discarded a bounded amount of it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect } from 'node:net';
import { ServerProcess } from './e2e/server-process.js';

let server: ServerProcess;
beforeAll(async () => { server = await ServerProcess.start(); });
afterAll(async () => { expect((await server.terminate()).code, server.output).toBe(0); });

describe('agent server: bodies over the limit', () => {
  it('answers each of five 5 MB bodies on a reused keep-alive connection with a 413 the client reads', async () => {
    const url = new URL('/api/sessions/s-big/turns', server.url);
    // A first request opens the connection the next ones reuse (fetch keeps connections alive).
    expect((await fetch(new URL('/healthz', server.url))).status).toBe(200);
    const body = JSON.stringify({ prompt: 'x'.repeat(5 * 1024 * 1024) });
    const outcomes: string[] = [];
    for (let i = 0; i < 5; i++) {
      try {
        const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
        const answer = await res.json() as { error: string };
        outcomes.push(`${res.status} ${answer.error.slice(0, 30)}`);
      } catch (error) {
        const cause = (error as { cause?: { code?: string } }).cause;
        outcomes.push(`failed: ${cause?.code ?? (error as Error).message}`);
      }
    }
    expect(outcomes).toEqual(Array(5).fill('413 request body: over 65536 bytes'));
    // The connection is still good for the next request.
    expect((await fetch(new URL('/healthz', server.url))).status).toBe(200);
  });

  it.each([
    ['chunked', 'transfer-encoding: chunked', true],
    ['announced as 1 GB', `content-length: ${2 ** 30}`, false],
  ])('cuts off a client whose body never ends (%s), after a bounded amount, having answered it 413', async (_kind, framing, chunked) => {
    const { hostname, port } = new URL(server.url);
    const socket = connect(Number(port), hostname);
    let answer = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => { answer += chunk; });
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    socket.on('error', () => {}); // the cut may reach the writer as a reset
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
    socket.write(`POST /api/sessions/s-endless/turns HTTP/1.1\r\nhost: ${hostname}:${port}\r\ncontent-type: application/json\r\n${framing}\r\n\r\n`);
    const chunk = Buffer.alloc(64 * 1024, 'x');
    const frame = chunked ? Buffer.concat([Buffer.from(`${chunk.length.toString(16)}\r\n`), chunk, Buffer.from('\r\n')]) : chunk;
    let open = true;
    // One 'close' listener for the whole loop (one a drain wait piled up past MaxListeners): it ends a drain wait too.
    let wake: (() => void) | undefined;
    void closed.then(() => { open = false; wake?.(); });
    // Writes as fast as the server takes it, for as long as the connection is open.
    void (async () => {
      while (open) {
        if (!socket.write(frame)) {
          await new Promise<void>((resolve) => {
            wake = resolve;
            socket.once('drain', resolve);
          });
        }
      }
    })();
    // Within the byte bound, long before the time bound (10 s) would end it.
    const cut = await Promise.race([closed.then(() => true), new Promise<boolean>((resolve) => setTimeout(() => resolve(false), 8_000))]);
    socket.destroy();
    expect(cut).toBe(true);
    expect(answer).toMatch(/^HTTP\/1\.1 413 /);
    expect(answer).toContain('request body: over 65536 bytes');
    // Bounded: the server discards at most 16 MiB, the rest is what the sockets' buffers held.
    expect(socket.bytesWritten).toBeLessThan(64 * 1024 * 1024);
  });
});

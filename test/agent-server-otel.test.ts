/**
 * The agent server with `OTEL_EXPORTER_OTLP_ENDPOINT` set exports its turns and stops over OTLP:
 * a local collector (an HTTP server taking OTLP/HTTP protobuf, whose strings travel as plain
 * UTF-8) receives the `invoke_agent` span of a stopped turn with its `fullstop.stop` event and the
 * `fullstop.stop.duration` metric, flushed on SIGTERM before the server exits 0.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ServerProcess } from './e2e/server-process.js';

const received: { path: string; body: Buffer }[] = [];
let collector: Server;
let endpoint: string;

beforeAll(async () => {
  collector = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    received.push({ path: req.url ?? '', body: Buffer.concat(chunks) });
    res.writeHead(200, { 'content-type': 'application/x-protobuf' });
    res.end();
  });
  await new Promise<void>((resolve) => collector.listen(0, '127.0.0.1', resolve));
  endpoint = `http://127.0.0.1:${(collector.address() as AddressInfo).port}`;
});
afterAll(async () => {
  collector.closeAllConnections();
  await new Promise((resolve) => collector.close(resolve));
});

/** Everything the collector received on `path`, as one text (protobuf keeps strings as they are). */
const text = (path: string) => Buffer.concat(received.filter((r) => r.path === path).map((r) => r.body)).toString('latin1');

describe('agent server with OpenTelemetry', () => {
  it("exports a stopped turn's span, its fullstop.stop event and the stop metric, flushed on SIGTERM", async () => {
    const server = await ServerProcess.start([], {
      OTEL_EXPORTER_OTLP_ENDPOINT: endpoint, OTEL_SERVICE_NAME: 'agent-server-test', OTEL_LOGS_EXPORTER: 'none',
    });
    expect(server.output).toContain(`OpenTelemetry to ${endpoint}`);
    const events = await server.events('otel-1');
    let turnId: string;
    try {
      turnId = (await server.post('/api/sessions/otel-1/turns', { prompt: 'crunch' })).body.turnId;
      await events.next('tool_call', (e) => e.data.turnId === turnId);
      expect((await server.post('/api/sessions/otel-1/stop', {})).body.outcome).toBe('stopped');
      await events.next('turn_aborted', (e) => e.data.turnId === turnId);
    } finally {
      events.close();
    }
    expect((await server.terminate()).code, server.output).toBe(0);
    const traces = text('/v1/traces');
    for (const expected of ['agent-server-test', 'invoke_agent', 'execute_tool crunch', 'otel-1', turnId, 'fullstop.stop', 'cancel.user']) {
      expect(traces, expected).toContain(expected);
    }
    expect(text('/v1/metrics')).toContain('fullstop.stop.duration');
  });

  it('without the variable, loads no OpenTelemetry at all', async () => {
    const server = await ServerProcess.start([], { OTEL_EXPORTER_OTLP_ENDPOINT: '' });
    expect(server.output).not.toContain('OpenTelemetry');
    const before = received.length;
    expect(await server.terminate(), server.output).toEqual({ code: 0, signal: null });
    expect(received.length).toBe(before);
  });
});

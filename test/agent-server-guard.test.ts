/**
 * The agent server refuses what another web page in the user's browser could send it: a POST from
 * a foreign Origin (403), a POST that is not JSON (415, the no-cors `text/plain` kind), a foreign
 * Host (421, DNS rebinding); with a token, every API request without it (401), while the page's
 * own files and same-origin requests still work.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'node:http';
import { ServerProcess } from './e2e/server-process.js';

/** A raw HTTP request with exactly the headers given (fetch would set Host and Origin itself). */
function send(server: ServerProcess, method: string, path: string, headers: Record<string, string>, body?: string): Promise<{ status: number; body: any }> {
  const url = new URL(path, server.url);
  return new Promise((resolve, reject) => {
    const req = request({ host: url.hostname, port: url.port, method, path: url.pathname, headers, setHost: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => { text += chunk; });
      res.on('end', () => resolve({ status: res.statusCode!, body: res.headers['content-type']?.startsWith('application/json') ? JSON.parse(text) : text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

const TOKEN = 'test-token-0123456789abcdef';

describe('agent server: cross-site requests (no token)', () => {
  let server: ServerProcess;
  let host: string;
  beforeAll(async () => {
    server = await ServerProcess.start();
    host = new URL(server.url).host;
  });
  afterAll(async () => { expect((await server.terminate()).code).toBe(0); });

  const json = () => ({ host, 'content-type': 'application/json' });

  it('refuses a POST from another origin with 403 and starts nothing', async () => {
    const res = await send(server, 'POST', '/api/sessions/g-evil/turns', { ...json(), origin: 'http://evil.example' }, '{"prompt":"shell"}');
    expect(res.status).toBe(403);
    expect(res.body.error).toMatch(/^Origin: "http:\/\/evil\.example" is not this server's origin/);
    expect((await send(server, 'POST', '/api/sessions/g-evil/stop', { ...json(), origin: 'null' }, '{}')).status).toBe(403);
    expect((await server.get('/api/sessions/g-evil/history')).status).toBe(404);
    expect((await server.get('/healthz')).body.stats.runningTurns).toBe(0);
  });

  it('refuses a POST that is not application/json with 415 (what a no-cors form or fetch can send)', async () => {
    for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', undefined]) {
      const headers: Record<string, string> = { host, ...(type === undefined ? {} : { 'content-type': type }) };
      const res = await send(server, 'POST', '/api/sessions/g-plain/turns', headers, '{"prompt":"shell"}');
      expect(res.status, String(type)).toBe(415);
      expect(res.body.error).toMatch(/^Content-Type: expected application\/json, got /);
    }
    expect((await server.get('/api/sessions/g-plain/history')).status).toBe(404);
  });

  it('refuses a foreign Host with 421, for the page and the API alike (DNS rebinding)', async () => {
    const port = new URL(server.url).port;
    for (const path of ['/', '/api/sessions/g-any/history', '/healthz', '/api/sessions/g-any/events']) {
      const res = await send(server, 'GET', path, { host: `rebound.example:${port}` });
      expect(res.status, path).toBe(421);
      expect(res.body.error).toMatch(/^Host: "rebound\.example:\d+" is not this server's/);
    }
  });

  it('serves its own origin under each loopback name, and clients that send no Origin', async () => {
    const port = new URL(server.url).port;
    for (const name of ['127.0.0.1', 'localhost']) {
      const own = `${name}:${port}`;
      const res = await send(server, 'POST', '/api/sessions/g-own/stop', { host: own, origin: `http://${own}`, 'content-type': 'application/json; charset=utf-8' }, '{}');
      expect(res.status, own).toBe(200); // routed: nothing to stop yet
      expect(res.body).toEqual({ outcome: 'not_found', sessionId: 'g-own' });
      expect((await send(server, 'GET', '/', { host: own })).status).toBe(200);
    }
    const started = await send(server, 'POST', '/api/sessions/g-own/turns', { ...json(), origin: `http://${host}` }, '{"prompt":"hi"}');
    expect(started.status).toBe(202);
    const events = await server.events('g-own');
    try {
      await events.next('status', (e) => e.data.status === 'completed' && e.data.turnId === started.body.turnId);
    } finally {
      events.close();
    }
  });
});

describe('agent server: bearer token and allowed hosts', () => {
  let server: ServerProcess;
  beforeAll(async () => {
    server = await ServerProcess.start(['--allowed-hosts', 'agent.example,other.example:8080'], { AGENT_SERVER_TOKEN: TOKEN });
  });
  afterAll(async () => { expect((await server.terminate()).code).toBe(0); });

  it('prints the page URL with #token= and says a token is required', () => {
    expect(server.token).toBe(TOKEN);
    expect(server.output).toMatch(/bearer token required/);
  });

  it('refuses every API request without the token (401) and serves it with the token', async () => {
    const port = new URL(server.url).port;
    const host = `127.0.0.1:${port}`;
    for (const [method, path] of [['GET', '/healthz'], ['GET', '/api/sessions/t-1/history'], ['GET', '/api/sessions/t-1/events'], ['POST', '/api/sessions/t-1/turns']]) {
      for (const authorization of [undefined, 'Bearer wrong-token-0123456789', `Basic ${TOKEN}`, `Bearer ${TOKEN}x`]) {
        const headers: Record<string, string> = { host, 'content-type': 'application/json', ...(authorization === undefined ? {} : { authorization }) };
        const res = await send(server, method, path, headers, method === 'POST' ? '{"prompt":"hi"}' : undefined);
        expect(res.status, `${method} ${path} ${authorization}`).toBe(401);
        expect(res.body.error).toMatch(/^Authorization: expected "Bearer <token>"/);
      }
    }
    expect((await server.get('/healthz')).status).toBe(200);
    expect((await server.get('/api/sessions/t-1/history')).status).toBe(404);
    // The page's files carry no data and a browser cannot send a header when it navigates.
    expect((await send(server, 'GET', '/', { host })).status).toBe(200);
    expect((await send(server, 'GET', '/app.js', { host })).status).toBe(200);
  });

  it('allows the hosts named by --allowed-hosts, with or without their port', async () => {
    const port = new URL(server.url).port;
    const auth = { authorization: `Bearer ${TOKEN}` };
    expect((await send(server, 'GET', '/healthz', { ...auth, host: `agent.example:${port}` })).status).toBe(200);
    expect((await send(server, 'GET', '/healthz', { ...auth, host: 'agent.example' })).status).toBe(200);
    expect((await send(server, 'GET', '/healthz', { ...auth, host: 'other.example:8080' })).status).toBe(200);
    expect((await send(server, 'GET', '/healthz', { ...auth, host: 'other.example:9090' })).status).toBe(421);
    expect((await send(server, 'GET', '/healthz', { ...auth, host: `evil.example:${port}` })).status).toBe(421);
  });
});

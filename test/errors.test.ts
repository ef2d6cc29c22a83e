/**
 * Errors are part of the API: every class has a stable code, and a stop reads as an abort to any
 * library it is handed to (its name), while fullstop still knows it (isCancelledError).
 */
import { afterAll, describe, expect, it } from 'vitest';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  CancelledError, ErrorCodes, FatalToolError, SessionBusyError, ShuttingDownError, StopReasons, ToolError, TurnIdUsedError,
  TurnRegistry, TurnRunner, checkCancelled, isCancelledError, runInTurn,
} from '../dist/src/index.js';

const registry = new TurnRegistry();

describe('error codes', () => {
  it('every error class has its stable code', () => {
    expect(new CancelledError().code).toBe('ERR_FULLSTOP_CANCELLED');
    expect(new ToolError('x').code).toBe('ERR_FULLSTOP_TOOL');
    expect(new FatalToolError('x').code).toBe('ERR_FULLSTOP_FATAL_TOOL');
    expect(new SessionBusyError('x', 's').code).toBe('ERR_FULLSTOP_SESSION_BUSY');
    expect(new TurnIdUsedError('x', 't').code).toBe('ERR_FULLSTOP_TURN_ID_USED');
    expect(new ShuttingDownError('x').code).toBe('ERR_FULLSTOP_SHUTTING_DOWN');
    expect(Object.isFrozen(ErrorCodes)).toBe(true);
  });

  it('a busy session and a used turn id are refused with theirs, starting nothing', async () => {
    const runner = new TurnRunner({ registry });
    let release!: () => void;
    const first = runner.run('s', () => new Promise<void>((r) => { release = r; }), { turnId: 't' });
    await expect(runner.run('s', async () => 1)).rejects.toMatchObject({ name: 'SessionBusyError', code: ErrorCodes.sessionBusy, sessionId: 's' });
    await expect(runner.run('other', async () => 1, { turnId: 't' })).rejects.toMatchObject({ code: ErrorCodes.turnIdUsed, turnId: 't' });
    release();
    await first;
  });
});

describe('StopReasons', () => {
  it('names the reasons by intent, frozen', () => {
    expect(StopReasons).toEqual({
      user: 'cancel.user', client: 'cancel.client', disconnect: 'cancel.disconnect', shutdown: 'cancel.shutdown', timeout: 'cancel.timeout',
    });
    expect(Object.isFrozen(StopReasons)).toBe(true);
  });
});

describe('a token\'s signal.reason', () => {
  it('is named AbortError and is still a CancelledError; what the token\'s own checks throw keeps its name', () => {
    const token = registry.beginTurn('s', 't');
    token.cancel('cancel.user');
    const reason = token.signal.reason as CancelledError;
    expect(reason.name).toBe('AbortError');
    expect(reason).toBeInstanceOf(CancelledError);
    expect(reason.code).toBe('ERR_FULLSTOP_CANCELLED');
    expect(isCancelledError(reason)).toBe(true);
    expect(() => token.throwIfCancelled()).toThrow(expect.objectContaining({ name: 'CancelledError' }));
    expect(() => runInTurn(token, () => checkCancelled())).toThrow(expect.objectContaining({ name: 'CancelledError' }));
    registry.endTurn('s', token);
  });

  it('with a custom reason, and for a child token, too', () => {
    const token = registry.beginTurn('s', 't');
    const child = token.child();
    token.cancel(new Error('quota'));
    expect((token.signal.reason as Error).name).toBe('AbortError');
    expect((child.signal.reason as Error).name).toBe('AbortError');
    expect((token.signal.reason as CancelledError).reason).toBeInstanceOf(Error);
    registry.endTurn('s', token);
  });

  describe('handed to fetch', () => {
    let server: Server;
    afterAll(() => new Promise<void>((r) => server.close(() => r())));

    it('makes fetch take its abort path: it rejects with the stop, which isCancelledError knows', async () => {
      let requested!: () => void;
      const request = new Promise<void>((r) => { requested = r; });
      server = createServer((_req, res) => { res.writeHead(200); res.write('partial'); requested(); });
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
      const { port } = server.address() as AddressInfo;
      const runner = new TurnRunner({ registry, graceMs: 100 });
      let caught: unknown;
      const outcome = runner.run('s', async (turn) => {
        try {
          const res = await fetch(`http://127.0.0.1:${port}/`, { signal: turn.signal });
          await res.text();
        } catch (error) {
          caught = error;
        }
      });
      await request;
      const report = await runner.stop('s');
      await outcome;
      expect(report!.settledCooperatively).toBe(true);
      expect((caught as Error).name).toBe('AbortError');
      expect(isCancelledError(caught)).toBe(true);
      server.closeAllConnections();
    });
  });
});

describe('isCancelledError', () => {
  const wrap = (error: unknown, depth: number): unknown => {
    let e = error;
    for (let i = 0; i < depth; i++) e = new Error(`wrapper ${i}`, { cause: e });
    return e;
  };

  it('finds a stop wrapped as a cause up to 8 links deep, and not 9', () => {
    expect(isCancelledError(wrap(new CancelledError(), 8))).toBe(true);
    expect(isCancelledError(wrap(new CancelledError(), 9))).toBe(false);
    expect(isCancelledError(wrap(new Error('other'), 3))).toBe(false);
  });

  it('never throws, whatever it is given', () => {
    const hostile = new Proxy({}, { get() { throw new Error('trap'); }, getPrototypeOf() { throw new Error('trap'); } });
    expect(isCancelledError(hostile)).toBe(false);
    const cyclic: { cause?: unknown } = new Error('loop');
    cyclic.cause = cyclic;
    expect(isCancelledError(cyclic)).toBe(false);
    expect(isCancelledError(null)).toBe(false);
    expect(isCancelledError('CancelledError')).toBe(false);
  });
});

describe('String(token)', () => {
  it('prints what console.log does', async () => {
    const { inspect } = await import('node:util');
    const token = registry.beginTurn('s', 't');
    expect(String(token)).toBe("CancelToken { sessionId: 's', turnId: 't', state: 'running' }");
    expect(`${token}`).toBe(inspect(token));
    registry.endTurn('s', token);
  });
});

/**
 * A session's event log (examples/agent-server/event-log.ts): numbered frames, replay after an
 * id, and its bounds — in bytes as well as in count, and per event.
 */
import { describe, expect, it } from 'vitest';
import { EventLog, MAX_EVENT_BYTES, MAX_LOG_BYTES, MAX_LOG_EVENTS } from '../dist/examples/agent-server/event-log.js';

const parse = (frame: string) => {
  const [, id, type, data] = /^id: (\d+)\nevent: (\w+)\ndata: (.*)\n\n$/s.exec(frame)!;
  return { id: Number(id), type, data: JSON.parse(data) };
};

describe('agent server event log', () => {
  it('numbers events from 1 and replays those after an id (all of them for an id it never gave)', () => {
    const log = new EventLog();
    for (let i = 0; i < 5; i++) log.append('say', { turnId: 't', text: `w${i}` });
    expect(log.since(3).map(parse).map((e) => e.id)).toEqual([4, 5]);
    expect(log.since(undefined)).toHaveLength(5);
    expect(log.since(99)).toHaveLength(5); // the server restarted since the client's id
    expect(parse(log.since(4)[0])).toEqual({ id: 5, type: 'say', data: { turnId: 't', text: 'w4' } });
  });

  it('keeps at most MAX_LOG_BYTES of frames: 24 KB events are dropped oldest first', () => {
    const log = new EventLog();
    const prompt = '\u0001'.repeat(4000); // 24 KB of JSON
    for (let i = 0; i < 200; i++) log.append('turn_started', { turnId: `t${i}`, prompt });
    expect(log.bytes).toBeLessThanOrEqual(MAX_LOG_BYTES);
    expect(log.bytes).toBeGreaterThan(MAX_LOG_BYTES - 30_000);
    const kept = log.since(undefined).map(parse);
    expect(kept.at(-1)!.id).toBe(200);
    expect(kept.map((e) => e.id)).toEqual(kept.map((_, i) => 200 - kept.length + 1 + i));
    expect(log.since(undefined).reduce((n, f) => n + Buffer.byteLength(f), 0)).toBe(log.bytes);
  });

  it(`keeps at most ${MAX_LOG_EVENTS} events`, () => {
    const log = new EventLog();
    for (let i = 0; i < MAX_LOG_EVENTS + 10; i++) log.append('say', { turnId: 't', text: 'x' });
    const kept = log.since(undefined).map(parse);
    expect(kept).toHaveLength(MAX_LOG_EVENTS);
    expect(kept[0].id).toBe(11);
  });

  it('sends an event over MAX_EVENT_BYTES without its large fields, marked truncated', () => {
    const log = new EventLog();
    const { frame } = log.append('tool_output', { turnId: 't', callId: 'c1', name: 'shell', output: 'x'.repeat(200_000), success: true });
    expect(Buffer.byteLength(frame)).toBeLessThanOrEqual(MAX_EVENT_BYTES);
    expect(parse(frame).data).toEqual({ turnId: 't', callId: 'c1', name: 'shell', success: true, truncated: true });
  });
});

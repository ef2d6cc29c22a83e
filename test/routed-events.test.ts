/**
 * `follow` (src/turn/routed-events.ts): a runner's events routed by key with one listener per event
 * and key field, whatever the number of followers, and none once the last follower ends.
 */
import { describe, expect, it } from 'vitest';
import { TurnRegistry, TurnRunner } from '../dist/src/index.js';
import { follow } from '../dist/src/turn/routed-events.js';

describe('follow', () => {
  it('routes each event to the followers of its key through one listener, and leaves none after the last end', async () => {
    const runner = new TurnRunner({ registry: new TurnRegistry() });
    const heard = new Map<string, string[]>();
    const ends = Array.from({ length: 1000 }, (_, i) => follow(runner, 'say', 'sessionId', `s${i}`, (e) => {
      heard.set(`s${i}`, [...(heard.get(`s${i}`) ?? []), e.text]);
    }));
    const second: string[] = [];
    const endSecond = follow(runner, 'say', 'sessionId', 's7', (e) => second.push(e.text));
    const byTurn: string[] = [];
    const endByTurn = follow(runner, 'say', 'turnId', 'T', (e) => byTurn.push(e.text));
    expect(runner.listenerCount('say')).toBe(2); // one for sessionId, one for turnId
    await runner.run('s7', async (turn) => { await turn.say('hello'); }, { turnId: 'T' });
    await runner.run('s8', async (turn) => { await turn.say('other'); });
    expect(heard.get('s7')).toEqual(['hello']);
    expect(heard.get('s8')).toEqual(['other']);
    expect(heard.size).toBe(2);
    expect(second).toEqual(['hello']);
    expect(byTurn).toEqual(['hello']);
    // An end is idempotent and ends its own follow only.
    ends[7]!();
    ends[7]!();
    await runner.run('s7', async (turn) => { await turn.say('again'); });
    expect(heard.get('s7')).toEqual(['hello']);
    expect(second).toEqual(['hello', 'again']);
    endSecond();
    endByTurn();
    for (const end of ends) end();
    expect(runner.listenerCount('say')).toBe(0);
  });
});

/**
 * The append call's arrays go as one text each, split by the server (statements.ts `joinTexts`,
 * `joinNumbers`): ids that hold the separators or look like the array syntax must come back
 * exactly, in a small batch and in a set one, and an answer of all `ok` comes back as no answer.
 */
import { describe, expect, it } from 'vitest';
import { TurnIdUsedError, type LedgerEntry } from '../dist/src/index.js';
import { PgLedger } from '../dist/src/ledger/postgres/index.js';
import { pgLedgerHooks } from '../dist/src/ledger/postgres/pg-ledger-hooks.js';
import { pgScene } from './support/pg.js';

const pg = pgScene('wire');
const typeOf = (e: LedgerEntry) => (e.type === 'status' ? `status:${e.status}` : e.type);
const open = (schema: string, instanceId: string) => PgLedger.open({ pool: pg.pool(), schema, instanceId });

// `-` is how a null status is sent; `,` splits the numbers; the rest is an array literal's syntax.
const ODD = ['-', 'a,b', '"q"', 'back\\slash', '{x,y}', 'NULL', ' spaced ', 'tab\t', '[1]', '-\u2028-'];

describe('ids in the append call', () => {
  const cases = [
    { name: 'none holding a newline (joined by newlines)', ids: ODD },
    { name: 'one holding a newline (sent as JSON)', ids: [...ODD, 'line\nbreak', '\n'] },
  ];
  const rowsOf = (ledger: PgLedger, id: string) => [
    ledger.append({ sessionId: id, turnId: id, type: 'turn_started' }),
    ledger.append({ sessionId: id, turnId: id, type: 'status', status: 'cancelling', reason: 'cancel.user' }),
    ledger.append({ sessionId: id, turnId: id, type: 'say', text: id }),
    ledger.append({ sessionId: id, turnId: id, type: 'status', status: 'cancelled' }),
  ];
  for (const { name, ids } of cases) {
    for (const set of [false, true]) {
      it(`${name}, ${set ? 'a set of rows in one transaction' : 'a few rows a transaction'}: each kept exactly, each turn's rules kept`, async () => {
        const schema = pg.schema();
        const ledger = await open(schema, 'A');
        await ledger.append({ sessionId: 'old', turnId: 'old', type: 'turn_started' });
        const used = () => ledger.append({ sessionId: 'x', turnId: 'old', type: 'turn_started' });
        if (set) {
          // More than 16 rows (append_entries' set path), at most 64 (one lane's share: one transaction).
          const before = pgLedgerHooks(ledger)!.transactions;
          const filler = 63 - ids.length * 4;
          const results = await Promise.allSettled([
            ...ids.flatMap((id) => rowsOf(ledger, id)),
            ...Array.from({ length: filler }, (_, i) => ledger.append({ sessionId: `f${i}`, turnId: `f${i}`, type: 'turn_started' })),
            used(),
          ]);
          expect(filler).toBeGreaterThan(0);
          expect(pgLedgerHooks(ledger)!.transactions - before).toBe(1);
          expect(results.slice(0, -1).every((r) => r.status === 'fulfilled')).toBe(true);
          expect((results.at(-1) as PromiseRejectedResult).reason).toBeInstanceOf(TurnIdUsedError);
        } else {
          // Five rows (append_entries' row-by-row path) a transaction.
          for (const id of ids) {
            const before = pgLedgerHooks(ledger)!.transactions;
            const results = await Promise.allSettled([...rowsOf(ledger, id), used()]);
            expect(pgLedgerHooks(ledger)!.transactions - before).toBe(1);
            expect(results.slice(0, -1).every((r) => r.status === 'fulfilled')).toBe(true);
            expect((results.at(-1) as PromiseRejectedResult).reason).toBeInstanceOf(TurnIdUsedError);
          }
        }
        const reader = await open(schema, 'reader');
        for (const id of ids) {
          const own = await reader.entries({ sessionId: id });
          expect(own.map((e) => [e.sessionId, e.turnId, typeOf(e)])).toEqual([
            [id, id, 'turn_started'], [id, id, 'status:cancelling'], [id, id, 'say'], [id, id, 'status:cancelled']]);
          expect((own[2] as { text: string }).text).toBe(id);
          expect(await reader.entries({ turnId: id })).toEqual(own);
          // The turn row took the batch's end (its status read as written), its session and owner whole.
          await expect(ledger.append({ sessionId: id, turnId: id, type: 'status', status: 'failed', reason: 'late' })).rejects.toThrow(/has ended/);
          await expect(reader.append({ sessionId: id, turnId: id, type: 'status', status: 'failed', reason: 'x' })).rejects.toThrow(/another instance/);
          await expect(ledger.append({ sessionId: 'other', turnId: id, type: 'status', status: 'failed', reason: 'x' })).rejects.toThrow(/another session/);
        }
        await Promise.all([ledger.close(), reader.close()]);
      });
    }
  }
});

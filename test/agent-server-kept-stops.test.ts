/**
 * The server's book of stops kept for turns that have not started
 * (examples/agent-server/kept-stops.ts): a session's first stop always has room, whatever other
 * sessions hold; the stops past a session's first share a bounded room; nothing kept is dropped.
 */
import { describe, expect, it } from 'vitest';
import { KeptStops, MAX_KEPT_STOPS_PER_SESSION, MAX_SESSIONS_WITH_STOPS, MAX_SHARED_KEPT_STOPS } from '../dist/examples/agent-server/kept-stops.js';

function keep(book: KeptStops, sessionId: string, turnId: string): string {
  const why = book.refusal(sessionId, turnId);
  if (why !== undefined) return why;
  book.add(sessionId, turnId, 'cancel.user');
  return 'kept';
}

describe("the server's kept stops", () => {
  it("keeps a session's first stop when other sessions have filled the shared room, and refuses only the others' extra ones", () => {
    const book = new KeptStops(60_000);
    const answers = new Map<string, number>();
    // 110 sessions, 100 stops each: 110 first ones, then 10,890 extra ones for 10,000 shared places.
    for (let s = 0; s < 110; s++) {
      for (let t = 0; t < MAX_KEPT_STOPS_PER_SESSION; t++) {
        const answer = keep(book, `flood-${s}`, `t-${t}`);
        answers.set(answer, (answers.get(answer) ?? 0) + 1);
      }
    }
    expect(Object.fromEntries(answers)).toEqual({ kept: 110 + MAX_SHARED_KEPT_STOPS, book_full: 110 * 99 - MAX_SHARED_KEPT_STOPS });
    // A user's own first stop for their session is kept all the same, and its second is not.
    expect(keep(book, 'user', 'turn-1')).toBe('kept');
    expect(keep(book, 'user', 'turn-2')).toBe('book_full');
    // Nothing kept was dropped: the first flood stop is still there, and the user's is taken once.
    expect(book.take('flood-0', 't-0')).toMatchObject({ reason: 'cancel.user' });
    expect(book.take('user', 'turn-1')).toMatchObject({ reason: 'cancel.user' });
    expect(book.take('user', 'turn-1')).toBeUndefined();
    expect(book.size).toBe(110 + MAX_SHARED_KEPT_STOPS + 1 - 2);
  });

  it('frees a shared place when any stop of a session holding several goes', () => {
    const book = new KeptStops(60_000);
    for (let s = 0; s < MAX_SHARED_KEPT_STOPS / 50; s++) for (let t = 0; t < 51; t++) expect(keep(book, `s-${s}`, `t-${t}`)).toBe('kept');
    expect(keep(book, 's-0', 'one-more')).toBe('book_full');
    // Its first stop goes (its turn starts): the session still holds 50, 49 of them shared.
    book.take('s-0', 't-0');
    expect(keep(book, 's-0', 'one-more')).toBe('kept');
    expect(keep(book, 's-1', 'one-more')).toBe('book_full');
  });

  it("bounds a session: past its most, its new stops are refused (session_full); a repeat is the stop kept", () => {
    const book = new KeptStops(60_000);
    for (let t = 0; t < MAX_KEPT_STOPS_PER_SESSION; t++) expect(keep(book, 's', `t-${t}`)).toBe('kept');
    expect(keep(book, 's', 'one-too-many')).toBe('session_full');
    expect(book.refusal('s', 't-7')).toBeUndefined();
    expect(book.add('s', 't-7', 'other').reason).toBe('cancel.user');
  });

  it('forgets a stop once it expired, and keeps none with a ttl of 0', async () => {
    const book = new KeptStops(50);
    book.add('s', 't', 'cancel.user');
    expect(book.size).toBe(1);
    await new Promise((resolve) => setTimeout(resolve, 120));
    expect(book.size).toBe(0);
    expect(book.take('s', 't')).toBeUndefined();
    expect(new KeptStops(0).refusal('s', 't')).toBe('disabled');
  });

  it('holds a first stop for up to MAX_SESSIONS_WITH_STOPS sessions (its memory bound)', () => {
    const book = new KeptStops(60_000);
    for (let s = 0; s < MAX_SESSIONS_WITH_STOPS; s++) book.add(`s-${s}`, 't', 'cancel.user');
    expect(book.refusal('one-more', 't')).toBe('book_full');
    book.take('s-0', 't');
    expect(book.refusal('one-more', 't')).toBeUndefined();
  });
});

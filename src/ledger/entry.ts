/**
 * The ledger's entry schema (docs/design.md §3): the entry types, the turn statuses, the checks that
 * guard `Ledger.append`, and the status entries that close the turns a crash left open (the
 * parser that reads a ledger file back is scan.ts).
 *
 * One entry is one JSON object on one line: `{ seq, at, sessionId, turnId, type, ... }`. The
 * ledger assigns `seq` and `at`; the caller supplies the rest (`LedgerEntryInput`).
 */

import { FleetReasons, TERMINAL_STATUSES, TURN_STATUSES } from '../constants.js';
import { checkId, describe } from '../errors.js';
import { renderSafely } from '../base/render.js';
import { abortedToolText, INTERRUPTED_TOOL_TEXT, turnAbortedMarker, TURN_ABORTED_MARKER } from './texts.js';

export { TERMINAL_STATUSES, TURN_STATUSES };
// The texts live in texts.ts; re-exported here, where they were first.
export { abortedToolText, INTERRUPTED_TOOL_TEXT, turnAbortedMarker, TURN_ABORTED_MARKER };
/** A turn's status. `cancelling` is the durable intent written before any stop signal. */
export type TurnStatus = (typeof TURN_STATUSES)[number];
/** A status that ends a turn. */
export type TerminalStatus = (typeof TERMINAL_STATUSES)[number];

/** True when `status` is one of `TERMINAL_STATUSES`. */
export function isTerminalStatus(status: unknown): status is TerminalStatus {
  return (TERMINAL_STATUSES as readonly unknown[]).includes(status);
}

/** Every entry `type`, in the order a turn usually writes them. */
export const LEDGER_ENTRY_TYPES = [
  'turn_started', 'tool_call', 'tool_output', 'tool_aborted', 'say', 'status', 'turn_aborted',
] as const;
/** The `type` of a ledger entry. */
export type LedgerEntryType = (typeof LEDGER_ENTRY_TYPES)[number];

/** Fields every entry has. */
export interface LedgerEntryBase {
  /** Position in the file: 1, 2, 3 … with no gaps, continuing across reopens. File order = seq order. */
  seq: number;
  /** When `append` was called, in epoch milliseconds (`Date.now()`); `seq`, not `at`, is the order. */
  at: number;
  sessionId: string;
  turnId: string;
}

/** The turn began. */
export interface TurnStartedEntry extends LedgerEntryBase {
  type: 'turn_started';
  /** The user's message that started the turn (`run`'s `input`), as JSON; absent when none was given. */
  input?: unknown;
}
/** A tool is about to run; written before it starts, so a crash mid-call still shows the call. */
export interface ToolCallEntry extends LedgerEntryBase {
  type: 'tool_call'; callId: string; name: string;
  /** The call's arguments as JSON; `undefined` is written as `null`. */
  args: unknown;
}
/** A tool call finished: its real output (`success: false` for a `ToolError`). */
export interface ToolOutputEntry extends LedgerEntryBase {
  type: 'tool_output'; callId: string; output: unknown; success: boolean;
}
/**
 * A tool call was stopped before it finished; `output` is `abortedToolText(elapsed, reason)`. A call that
 * had not returned when the stop's signal went out is aborted even if it returned during the
 * grace: what it returned (or threw) then is kept as `partial`, never as a finished output.
 */
export interface ToolAbortedEntry extends LedgerEntryBase {
  type: 'tool_aborted'; callId: string; output: string;
  /**
   * What the call returned (`success: true`) or threw (its message) after the signal; or, with
   * `progress: true`, the output it had reported (`call.progress`) when it returned nothing itself.
   * Absent when there is none of these. `omittedBytes`, when the output was cut to the runner's
   * bound: the bytes it leaves out, the N of its `… N bytes omitted …` line.
   */
  partial?: { output: unknown; success: boolean; progress?: true; omittedBytes?: number };
}
/** Streamed output of the turn, kept on a stop. */
export interface SayEntry extends LedgerEntryBase { type: 'say'; text: string }
/** The turn's status changed; `reason` is a reason code such as `'cancel.user'` or `'restart'`; `detail` (on `cancelling`) is `StopReport.detail`. */
export interface StatusEntry extends LedgerEntryBase { type: 'status'; status: TurnStatus; reason?: string; detail?: string }
/**
 * The marker that ends a stopped turn's history; `text` is `turnAbortedMarker(reason, { backgroundRunning })`
 * (for `cancel.user` with no background process of the turn alive at the stop, `TURN_ABORTED_MARKER`).
 */
export interface TurnAbortedEntry extends LedgerEntryBase {
  type: 'turn_aborted'; text: string;
  /** The stop's reason code; absent in entries written before it was recorded. */
  reason?: string;
}

/** One line of the ledger, discriminated by `type`. */
export type LedgerEntry =
  | TurnStartedEntry | ToolCallEntry | ToolOutputEntry | ToolAbortedEntry | SayEntry | StatusEntry | TurnAbortedEntry;

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;
/** What `Ledger.append` takes: an entry without `seq` and `at`, which the ledger assigns. */
export type LedgerEntryInput = DistributiveOmit<LedgerEntry, 'seq' | 'at'>;

const WHERE = 'Ledger.append';

function checkString(field: string, value: unknown): void {
  if (typeof value !== 'string') throw new TypeError(`${WHERE}: entry.${field}: expected a string, got ${describe(value)}`);
}

/** The checks per type, beyond sessionId/turnId/type; each throws a TypeError naming the field. */
const FIELD_CHECKS: Record<LedgerEntryType, (e: Record<string, unknown>) => void> = {
  turn_started: () => {},
  tool_call: (e) => { checkId(`${WHERE}: entry.callId`, e.callId); checkId(`${WHERE}: entry.name`, e.name); },
  tool_output: (e) => {
    checkId(`${WHERE}: entry.callId`, e.callId);
    if (typeof e.success !== 'boolean') {
      throw new TypeError(`${WHERE}: entry.success: expected a boolean, got ${describe(e.success)}`);
    }
  },
  tool_aborted: (e) => {
    checkId(`${WHERE}: entry.callId`, e.callId);
    checkString('output', e.output);
    const partial = e.partial as { success?: unknown } | undefined;
    if (partial !== undefined && (partial === null || typeof partial !== 'object' || typeof partial.success !== 'boolean')) {
      throw new TypeError(`${WHERE}: entry.partial: expected { output, success: boolean }, got ${describe(e.partial)}`);
    }
  },
  say: (e) => checkString('text', e.text),
  status: (e) => {
    if (!(TURN_STATUSES as readonly unknown[]).includes(e.status)) {
      throw new TypeError(`${WHERE}: entry.status: expected one of ${TURN_STATUSES.join(', ')}, got ${describe(e.status)}`);
    }
    if (e.reason !== undefined) checkString('reason', e.reason);
  },
  turn_aborted: (e) => {
    checkString('text', e.text);
    if (e.reason !== undefined) checkString('reason', e.reason);
  },
};

/**
 * A plain copy of the entry's own enumerable fields, each read exactly once, so what is checked is
 * what is written: a getter that changes between reads, a Proxy that hides a field from one kind of
 * look-up, or a trap that throws cannot make the line differ from the checked values. A top-level
 * `toJSON` is refused, because `JSON.stringify` would write what it returns instead of the entry.
 */
function snapshot(entry: unknown): Record<string, unknown> {
  if (entry === null || typeof entry !== 'object' || Array.isArray(entry)) {
    throw new TypeError(`${WHERE}: expected an entry object, got ${describe(entry)}`);
  }
  const copy: Record<string, unknown> = Object.create(null);
  try {
    for (const key of Object.keys(entry)) copy[key] = (entry as Record<string, unknown>)[key];
  } catch (cause) {
    throw new TypeError(`${WHERE}: the entry's fields cannot be read (${renderSafely(cause)})`, { cause });
  }
  if ('toJSON' in copy) throw new TypeError(`${WHERE}: entry.toJSON: an entry is plain data; it must not define toJSON`);
  return copy;
}

/**
 * Checks `entry` and renders its line (with the trailing newline) for the given seq and time.
 * Throws a TypeError naming the bad field; nothing is assigned or written when it throws.
 *
 * `seq`/`at` in the input are refused rather than ignored: a caller that supplies them believes it
 * controls them, and silently replacing them would hide that mistake.
 */
export function renderEntry(entry: unknown, seq: number, at: number):
  { line: string; sessionId: string; turnId: string; type: LedgerEntryType; status: unknown } {
  const e = snapshot(entry);
  for (const field of ['seq', 'at']) {
    if (field in e) throw new TypeError(`${WHERE}: entry.${field}: assigned by the ledger, do not supply it (got ${describe(e[field])})`);
  }
  checkId(`${WHERE}: entry.sessionId`, e.sessionId);
  checkId(`${WHERE}: entry.turnId`, e.turnId);
  const type = checkFields(e);
  const { sessionId, turnId } = e;
  // The line's fields: the ledger's and the identity first, then the rest in the entry's order.
  // Built in one pass over the snapshot (a rest-destructuring of it is a second copy on every append).
  const out: Record<string, unknown> = { seq, at, sessionId, turnId, type };
  for (const key in e) {
    if (key === 'sessionId' || key === 'turnId' || key === 'type') continue;
    // A field named "__proto__" stays a field, as a spread would keep it.
    if (key === '__proto__') Object.defineProperty(out, key, { value: e[key], enumerable: true, writable: true, configurable: true });
    else out[key] = e[key];
  }
  if (lacksArgs(type, out)) out.args = null;
  // Serialised now, so a caller mutating the object after append() cannot change the history.
  return { line: `${stringify(out)}\n`, sessionId: sessionId as string, turnId: turnId as string, type, status: e.status };
}

/** The entry's type, after the checks of its type's fields; a TypeError naming the bad one. */
function checkFields(e: Record<string, unknown>): LedgerEntryType {
  if (!(LEDGER_ENTRY_TYPES as readonly unknown[]).includes(e.type)) {
    throw new TypeError(`${WHERE}: entry.type: expected one of ${LEDGER_ENTRY_TYPES.join(', ')}, got ${describe(e.type)}`);
  }
  const type = e.type as LedgerEntryType;
  FIELD_CHECKS[type](e);
  return type;
}

/** `args` is the one field a reader expects to find even when the tool took nothing: it is written as null. */
function lacksArgs(type: LedgerEntryType, e: Record<string, unknown>): boolean {
  return type === 'tool_call' && e.args === undefined;
}

function stringify(value: object): string {
  try {
    return JSON.stringify(value);
  } catch (cause) {
    throw new TypeError(`${WHERE}: entry is not JSON-serialisable: ${renderSafely(cause)}`, { cause });
  }
}

/** An entry of one turn without its ids, `type` first: what fullstop's runner writes. */
export type TurnEntryBody = LedgerEntryInput extends infer E ? (E extends unknown ? Omit<E, 'sessionId' | 'turnId'> : never) : never;

/**
 * The `"sessionId":…,"turnId":…,` part of every line of one turn, checked and encoded
 * once a turn (`renderTurnEntry`).
 */
export function turnIdsJson(sessionId: string, turnId: string): string {
  checkId(`${WHERE}: entry.sessionId`, sessionId);
  checkId(`${WHERE}: entry.turnId`, turnId);
  return `"sessionId":${JSON.stringify(sessionId)},"turnId":${JSON.stringify(turnId)},`;
}

/**
 * The line `renderEntry` makes of `{ ...body, sessionId, turnId }`, byte for byte, for a
 * body fullstop's runner built itself (an object literal with `type` first and none of the fields
 * the ledger or the ids own; tool values already made plain JSON at the call). The same checks
 * of the type and its fields, and none of `renderEntry`'s copies: a stop writes its entries on a
 * main thread gone cold, where each copy costs measurably (the figures are in this function's commit message).
 */
export function renderTurnEntry(idsJson: string, body: TurnEntryBody, seq: number, at: number): string {
  // `{"type":…` → `{"seq":…,"at":…,"sessionId":…,"turnId":…,"type":…`: renderEntry's field order.
  return `{"seq":${seq},"at":${at},${idsJson}${turnEntryTail(body)}\n`;
}

/**
 * `body` checked and encoded as JSON without its opening brace (`"type":…}`): what follows the
 * ledger's fields and the ids in a runner's line (`renderTurnEntry`) or a `PgLedger` row's body.
 * Throws the TypeError of `renderEntry` for a bad type or field.
 */
export function turnEntryTail(body: TurnEntryBody): string {
  let e = body as unknown as Record<string, unknown>;
  const type = checkFields(e);
  // A copy only then; the spread keeps `args` where it stood, or appends it, as `renderEntry` does.
  if (lacksArgs(type, e)) e = { ...e, args: null };
  return stringify(e).slice(1);
}

interface OpenTurn {
  sessionId: string;
  turnId: string;
  finished: boolean;
  cancelling?: StatusEntry;
  marked: boolean;
  /** callId → when its tool_call was written, for the calls with no output yet. */
  calls: Map<string, number>;
}

/**
 * The entries that close every turn left open, in the order the turns first appear. For each
 * turn: a `tool_aborted` for each `tool_call` with no output (a model API refuses a history with a
 * call and no output), then, where a `cancelling` intent was written, the `turn_aborted` marker (if
 * the stop did not get to write it) and `cancelled` with the recorded reason; else `interrupted`
 * with `interruptedReason` (`restart`: a crash or a restart; a fleet's sweep gives `lease.expired`).
 */
export function closingEntries(entries: readonly LedgerEntry[], interruptedReason: string = FleetReasons.restart): LedgerEntryInput[] {
  const turns = new Map<string, OpenTurn>();
  for (const entry of entries) {
    const key = JSON.stringify([entry.sessionId, entry.turnId]);
    let turn = turns.get(key);
    if (turn === undefined) {
      turn = { sessionId: entry.sessionId, turnId: entry.turnId, finished: false, marked: false, calls: new Map() };
      turns.set(key, turn);
    }
    if (entry.type === 'tool_call') turn.calls.set(entry.callId, Number(entry.at));
    else if (entry.type === 'tool_output' || entry.type === 'tool_aborted') turn.calls.delete(entry.callId);
    else if (entry.type === 'turn_aborted') turn.marked = true;
    else if (entry.type === 'status') {
      if (isTerminalStatus(entry.status)) turn.finished = true;
      else if (entry.status === 'cancelling') turn.cancelling = entry;
    }
  }
  const repairs: LedgerEntryInput[] = [];
  for (const { sessionId, turnId, finished, cancelling, marked, calls } of turns.values()) {
    if (finished) continue;
    for (const [callId, at] of calls) {
      // `at` comes from the file: a hand-edited one may hold anything there.
      const elapsed = Number(cancelling?.at) - at;
      const output = cancelling === undefined
        ? INTERRUPTED_TOOL_TEXT : abortedToolText(Number.isFinite(elapsed) ? Math.max(0, elapsed) : 0, reasonOf(cancelling));
      repairs.push({ sessionId, turnId, type: 'tool_aborted', callId, output });
    }
    if (cancelling === undefined) {
      repairs.push({ sessionId, turnId, type: 'status', status: 'interrupted', reason: interruptedReason });
    } else {
      const reason = reasonOf(cancelling);
      if (!marked) {
        // The host that ran the turn is gone, and its background processes with it (exec's cleanup
        // and reaper): the repaired marker says nothing of them.
        repairs.push({ sessionId, turnId, type: 'turn_aborted', text: turnAbortedMarker(reason), ...(reason === undefined ? {} : { reason }) });
      }
      repairs.push({ sessionId, turnId, type: 'status', status: 'cancelled', ...(reason === undefined ? {} : { reason }) });
    }
  }
  return repairs;
}

/** A recorded `cancelling`'s reason; `undefined` when the file holds none (or not a string). */
function reasonOf(cancelling: StatusEntry): string | undefined {
  return typeof cancelling.reason === 'string' ? cancelling.reason : undefined;
}

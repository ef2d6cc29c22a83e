/**
 * A session's event log: the events its stream carries, numbered 1, 2, 3 … so a client
 * reconnecting with `Last-Event-ID` gets exactly what it missed. Memory only and bounded in count
 * and in bytes (a prompt of 4000 control characters is 24 KB of JSON, so a count alone bounds
 * nothing); the ledger is the durable record (`/history`).
 */

/** The events a session's stream carries. */
export const EVENT_TYPES = [
  'turn_started', 'say', 'tool_call', 'tool_progress', 'tool_output', 'question', 'turn_completed', 'turn_failed', 'turn_aborted',
] as const;
export type EventType = (typeof EVENT_TYPES)[number];

/** One event of a session's stream; `data` always has `turnId`. */
export interface SessionEvent {
  id: number;
  type: EventType;
  data: { turnId: string } & Record<string, unknown>;
}

/** Events a log keeps for replay at most; a client further behind gets the newest ones. */
export const MAX_LOG_EVENTS = 5000;
/** Bytes of frames a log keeps at most (the newest event is always kept). */
export const MAX_LOG_BYTES = 1024 * 1024;
/**
 * Bytes of one event's frame at most: a larger one (a tool's huge output) goes out without its
 * large fields and with `truncated: true`, so no single event can fill a client's backlog; the
 * ledger (`/history`) has it whole.
 */
export const MAX_EVENT_BYTES = 64 * 1024;
/** Room for a frame's `id`, `event` and `data` field names (a stream id is at most 41 characters). */
const FRAME_HEAD_BYTES = 100;
/** A field whose JSON is longer than this is left out of an event over `MAX_EVENT_BYTES`. */
const MAX_KEPT_FIELD_BYTES = 1024;

/** An event with its Server-Sent Events frame, built once for every client and every replay. */
interface Framed {
  id: number;
  frame: string;
  bytes: number;
}

/** The log of one session; see the file comment. */
export class EventLog {
  readonly #events: Framed[] = [];
  /** Index of the oldest kept event in `#events` (trimmed in batches, not one shift a time). */
  #start = 0;
  #bytes = 0;
  #lastId = 0;

  /** Bytes of the frames kept now. */
  get bytes(): number { return this.#bytes; }

  /** The id of the newest event (0 before the first). */
  get lastId(): number { return this.#lastId; }

  /** Appends an event; returns its frame (for the live clients) and how many bytes the log grew by. */
  append(type: EventType, data: SessionEvent['data']): { frame: string; grew: number } {
    const id = ++this.#lastId;
    const frame = `id: ${id}\nevent: ${type}\ndata: ${framed(data)}\n\n`;
    const bytes = Buffer.byteLength(frame);
    const before = this.#bytes;
    this.#events.push({ id, frame, bytes });
    this.#bytes += bytes;
    while (this.#events.length - this.#start > 1 && (this.#bytes > MAX_LOG_BYTES || this.#events.length - this.#start > MAX_LOG_EVENTS)) {
      this.#bytes -= this.#events[this.#start++].bytes;
    }
    if (this.#start > 1024) {
      this.#events.splice(0, this.#start);
      this.#start = 0;
    }
    return { frame, grew: this.#bytes - before };
  }

  /**
   * The frames after `lastEventId`, oldest first. An id past the end (this server restarted since)
   * replays everything kept.
   */
  since(lastEventId: number | undefined): string[] {
    const from = lastEventId === undefined || lastEventId > this.#lastId ? 0 : lastEventId;
    const frames: string[] = [];
    for (let i = this.#start; i < this.#events.length; i++) if (this.#events[i].id > from) frames.push(this.#events[i].frame);
    return frames;
  }
}

/** An event's `data` as the JSON its frame carries: without its large fields when over `MAX_EVENT_BYTES`. */
export function framed(data: SessionEvent['data']): string {
  const json = JSON.stringify(data);
  return Buffer.byteLength(json) > MAX_EVENT_BYTES - FRAME_HEAD_BYTES ? JSON.stringify(shrunk(data)) : json;
}

/** `data` without its fields longer than `MAX_KEPT_FIELD_BYTES` of JSON, marked `truncated`. */
function shrunk(data: SessionEvent['data']): SessionEvent['data'] {
  const kept: SessionEvent['data'] = { turnId: data.turnId, truncated: true };
  for (const [key, value] of Object.entries(data)) {
    const json = JSON.stringify(value);
    if (key !== 'turnId' && json !== undefined && Buffer.byteLength(json) <= MAX_KEPT_FIELD_BYTES) kept[key] = value;
  }
  return kept;
}

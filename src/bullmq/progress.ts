/**
 * A turn's live output reaching `job.updateProgress`: each `turn.say` and `call.progress` of the
 * job's turn becomes the job's progress, throttled and bounded.
 *
 * Invariants:
 * 1. Bounded in time: at most one `updateProgress` is in flight for a job, and the next starts no
 *    sooner than `intervalMs` after the previous one started; what arrives meanwhile replaces what
 *    waits (the latest wins), so a tool printing a line a millisecond costs one Redis write an
 *    interval.
 * 2. Bounded in size: a progress's text is at most `maxBytes` UTF-8 bytes (head and tail).
 * 3. Nothing after the end: `end()` sends what waits, then resolves once no write is in flight;
 *    the processor awaits it before the job moves on, so no write of the attempt lands after it.
 * 4. One listener a runner: a runner's `say` and `tool_progress` events are dispatched by turn id
 *    from one listener each, whatever the number of jobs running (no MaxListeners warning).
 */

import { headAndTail } from '../base/head-tail.js';
import { renderSafely } from '../base/render.js';
import type { TurnRunner } from '../turn/runner.js';
import { textOf } from '../turn/call-progress.js';
import { follow } from '../turn/routed-events.js';

/** What a job's progress holds while its turn says something or a tool reports output. */
export type TurnProgress =
  | { turnId: string; type: 'say'; text: string }
  | { turnId: string; type: 'tool_progress'; callId: string; name: string; text: string };

/** How the job's progress follows its turn (defaults in constants.ts). */
export interface ProgressOptions {
  /** The least time between two `job.updateProgress` calls of a job. @default 250 */
  intervalMs?: number;
  /** The most UTF-8 bytes of text a progress carries (head and tail beyond). @default 4096 */
  maxBytes?: number;
}

/** Invariant 4: `follow` (routed-events.ts) holds one listener a runner and event. */
type Sink = (progress: TurnProgress) => void;

/** Follow `turnId`'s output into `update` until `end()` (which resolves once nothing is in flight). */
export function followProgress(
  runner: TurnRunner, turnId: string, update: (progress: TurnProgress) => Promise<unknown>,
  options: Required<ProgressOptions>,
): { end(): Promise<void> } {
  let waiting: TurnProgress | undefined;
  let inFlight: Promise<void> | undefined;
  let lastStart = -Infinity;
  let timer: NodeJS.Timeout | undefined;
  const send = (): void => {
    timer = undefined;
    if (waiting === undefined || inFlight !== undefined) return;
    const progress = waiting;
    waiting = undefined;
    lastStart = Date.now();
    // Progress is best-effort: a failed write (a lost lock, Redis away) never fails the job.
    inFlight = update(progress).then(() => undefined, () => undefined).then(() => {
      inFlight = undefined;
      schedule();
    });
  };
  const schedule = (): void => {
    if (waiting === undefined || inFlight !== undefined || timer !== undefined) return;
    const wait = lastStart + options.intervalMs - Date.now();
    if (wait <= 0) send();
    else timer = setTimeout(send, wait);
  };
  const stopListening = listen(runner, turnId, (progress) => {
    waiting = bounded(progress, options.maxBytes);
    schedule();
  });
  return {
    async end() {
      stopListening();
      clearTimeout(timer);
      timer = undefined;
      while (inFlight !== undefined) await inFlight;
      if (waiting !== undefined) send();
      while (inFlight !== undefined) await inFlight;
    },
  };
}

function bounded(progress: TurnProgress, maxBytes: number): TurnProgress {
  return { ...progress, text: headAndTail(progress.text, maxBytes) };
}

/** A tool's progress data as text: a string itself, exec's `{ stream, text }` its text (`textOf`), else its JSON. */
function dataText(data: unknown): string {
  const text = textOf(data);
  if (text !== undefined) return text;
  try {
    return JSON.stringify(data) ?? renderSafely(data);
  } catch {
    return renderSafely(data);
  }
}

function listen(runner: TurnRunner, turnId: string, sink: Sink): () => void {
  const offSay = follow(runner, 'say', 'turnId', turnId, (e) => sink({ turnId, type: 'say', text: e.text }));
  const offTool = follow(runner, 'tool_progress', 'turnId', turnId, (e) => {
    sink({ turnId, type: 'tool_progress', callId: e.callId, name: e.name, text: dataText(e.data) });
  });
  return () => {
    offSay();
    offTool();
  };
}

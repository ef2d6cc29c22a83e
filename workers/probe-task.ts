/**
 * The pool target of `fullstop probe`: runs the user's task function under a binding of its own
 * whose token is a `RecordingToken` (workers/probe-token.ts) around the task's real one, for
 * everything the function starts (AsyncLocalStorage, as the pool binds its tasks). The user's module is loaded by this same worker, so its `fullstop/worker` import (or a
 * relative import of the compiled runtime) is the module instance whose binding is rebound here.
 *
 * Errors meant for the probe's own messages carry a prefix (`LOAD_FAILED`, `NO_EXPORT`,
 * workers/probe-record.ts): an error crosses back to the main thread as its message, and these
 * must not be mistaken for the task's own.
 */

import { isCancelledError } from '../src/errors.js';
import { callBound, currentBinding, TaskBinding } from './current.js';
import { loadExport } from './pool-task.js';
import { LOAD_FAILED, NO_EXPORT, type ProbeJob } from './probe-record.js';
import { RecordingToken } from './probe-token.js';
import { SlotToken } from './worker-token.js';

type Handler = (task: unknown) => unknown;

/** Handlers by `filename\0name`: loaded once per worker, like the pool's own targets. */
const handlers = new Map<string, Promise<Handler>>();

/** Run one probe job: the user's function, with every check of its token recorded. */
export async function probeTask(job: ProbeJob): Promise<unknown> {
  const user = await handlerOf(job.filename, job.name);
  const real = currentBinding()?.token;
  if (!(real instanceof SlotToken)) throw new Error('fullstop probe: a probe task runs only with a token');
  const recorder = new RecordingToken(real, job.record);
  // The user's function, and everything it starts, sees the recording token; what it leaves
  // behind sees a binding that is over once the task settled, as the pool's own bindings do.
  const binding = new TaskBinding(recorder);
  let stoppedAtCheck = false;
  try {
    recorder.begin();
    return await callBound(binding, user, job.task);
  } catch (e) {
    stoppedAtCheck = isCancelledError(e);
    throw e;
  } finally {
    binding.over = true;
    recorder.end(!stoppedAtCheck);
  }
}

function handlerOf(filename: string, name: string): Promise<Handler> {
  const key = `${filename}\0${name}`;
  let handler = handlers.get(key);
  if (handler === undefined) handlers.set(key, (handler = load(filename, name)));
  return handler;
}

/** The pool's own lookup (workers/pool-task.ts), its failures told with the probe's prefixes. */
async function load(filename: string, name: string): Promise<Handler> {
  let handler: unknown;
  try {
    handler = await loadExport({ filename, name });
  } catch (e) {
    throw new Error(LOAD_FAILED + firstLine(e));
  }
  if (typeof handler !== 'function') throw new Error(`${NO_EXPORT}${name}`);
  return handler as Handler;
}

function firstLine(e: unknown): string {
  const text = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
  return text.split('\n')[0]!;
}

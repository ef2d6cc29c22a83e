/**
 * `fullstop/worker`: what code running in a worker thread uses to see its turn's token.
 *
 * Inside a `TurnPool` task: `checkCancelled`, `isCancelled`, `sleep`, `checkpoint`, `cancelTurn`
 * act on the task's token (see current.ts for what they do outside a task). In a thread you start
 * yourself: `tokenFromHandle(token.handle)`.
 */

export { checkCancelled, isCancelled, sleep, sleepUnlessCancelled, checkpoint, cancelTurn } from './current.js';
export { tokenFromHandle, type WorkerToken } from './worker-token.js';
export { CancelledError, isCancelledError, ToolError, FatalToolError } from '../src/errors.js';
export type { TokenHandle } from '../src/token/slot.js';

/**
 * `fullstop/worker`: what code running in a worker thread uses to see its turn's token.
 */

export { tokenFromHandle, type WorkerToken } from './worker-token.js';
export { CancelledError, isCancelledError, ToolError, FatalToolError } from '../src/errors.js';
export type { TokenHandle } from '../src/token/slot.js';

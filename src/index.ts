/**
 * `fullstop`: stop an agent turn everywhere at once. See README.md and DESIGN.md.
 */

export { CancelToken } from './token/token.js';
export { TurnRegistry, turns, type TurnRegistryOptions, type RegistryStats } from './token/registry.js';
export { runInTurn, runInSession, activeToken, checkCancelled } from './token/context.js';
export {
  CancelledError, isCancelledError, ToolError, FatalToolError, type CancelledErrorOptions,
} from './errors.js';
export type { TokenHandle } from './token/slot.js';

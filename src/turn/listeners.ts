/**
 * How a `TurnRunner` calls its event listeners (rule 3 of runner.ts): every listener gets the
 * event, and one that throws, or returns a promise that rejects, changes nothing of the turn; its
 * error becomes a process warning.
 */

import { renderSafely } from '../base/render.js';
import { callGuarded, warnCallbackFailed } from '../base/user-callback.js';
import { LISTENER_WARNING } from '../constants.js';

/** The `type` of the warnings a throwing event listener raises (`process.on('warning')`); exec's `onOutput` raises it too. */
export { LISTENER_WARNING };

/** Call each of `listeners` with `payload` (as `emitter`); a throw or a rejection is a warning, never a failure. */
export function callEach(listeners: ReadonlyArray<(payload: object) => unknown>, emitter: object, event: string, payload: object): void {
  for (const listener of listeners) {
    callGuarded(() => listener.call(emitter, payload), (error) => warnCallbackFailed(
      `TurnRunner: a "${event}" listener threw: ${renderSafely(error)}; the turn went on unchanged`, 'FULLSTOP_LISTENER_THREW'));
  }
}

/**
 * How a `TurnRunner` calls its event listeners (rule 3 of runner.ts): every listener gets the
 * event, and one that throws, or returns a promise that rejects, changes nothing of the turn; its
 * error becomes a process warning.
 */

import { renderSafely } from '../base/render.js';
import { LISTENER_WARNING } from '../constants.js';

/** The `type` of the warnings a throwing event listener raises (`process.on('warning')`); exec's `onOutput` raises it too. */
export { LISTENER_WARNING };

/** Call each of `listeners` with `payload` (as `emitter`); a throw or a rejection is a warning, never a failure. */
export function callEach(listeners: ReadonlyArray<(payload: object) => unknown>, emitter: object, event: string, payload: object): void {
  for (const listener of listeners) {
    try {
      const result: unknown = listener.call(emitter, payload);
      if (typeof (result as PromiseLike<unknown> | undefined)?.then === 'function') {
        (result as PromiseLike<unknown>).then(undefined, (error: unknown) => listenerThrew(event, error));
      }
    } catch (error) {
      listenerThrew(event, error);
    }
  }
}

function listenerThrew(event: string, error: unknown): void {
  try {
    process.emitWarning(`TurnRunner: a "${event}" listener threw: ${renderSafely(error)}; the turn went on unchanged`, {
      type: LISTENER_WARNING, code: 'FULLSTOP_LISTENER_THREW',
    });
  } catch {
    // Reporting must not become the failure it reports.
  }
}

/**
 * The file piscina loads in every worker of a TurnPool. It must be CommonJS: piscina `require`s
 * the filename first and looks up `exports[name]`, and only a CommonJS `module.exports` can be a
 * Proxy. The pool packs the user's real filename and export name into piscina's `name`
 * (src/pool/protocol.ts), and this Proxy hands piscina a wrapped handler for each one.
 * `__esModule: true` keeps piscina's interop helper from copying the (empty) export list.
 *
 * The promise returned here never rejects: piscina swallows a failed lookup and reports "No
 * handler function exported" instead of the cause, so the user's module is loaded by the handler
 * itself, at the first task (workers/pool-task.ts), where its error reaches that task.
 */

const handlers = new Map<string, Promise<unknown>>();

module.exports = new Proxy({}, {
  get(_target, key) {
    if (key === '__esModule') return true;
    // Only pool targets; anything else (a thenable probe for `then`, inspection) finds nothing.
    if (typeof key !== 'string' || !key.startsWith('fullstop:')) return undefined;
    let handler = handlers.get(key);
    if (handler === undefined) {
      handler = import('./pool-task.js').then((m) => m.handlerFor(key));
      handlers.set(key, handler);
    }
    return handler;
  },
});

/**
 * What the model sees of a cut call's output (`partial` on its `tool_aborted` entry): the text the
 * call had produced before the stop. `toModelMessages` (messages.ts) then cuts it to its head and
 * its tail within `partialBudgetBytes` (base/head-tail.ts), since a build's first error and its
 * last lines are what a reader of a stopped command needs.
 */

/**
 * The text of a `partial` as the ledger keeps it (`{ output, success }`, or the output itself): a
 * string as it is, else its JSON; `undefined` for none, an empty one, or a failure (`success:
 * false`: what a call threw once stopped is the stop's own echo, not output the call produced),
 * unless it is the call's progress output the runner kept (`progress: true`).
 */
export function partialText(partial: unknown): string | undefined {
  // `{ success }` alone is wrapped too: JSON drops an `output` of undefined (a call that returned
  // nothing, in a ledger written before the runner stopped recording such partials).
  const wrapped = partial !== null && typeof partial === 'object' && ('output' in partial || typeof (partial as { success?: unknown }).success === 'boolean');
  const kept = partial as { success?: unknown; progress?: unknown };
  if (wrapped && kept.success === false && kept.progress !== true) return undefined;
  const output = wrapped ? (partial as { output: unknown }).output : partial;
  if (output === undefined || output === null || output === '') return undefined;
  return typeof output === 'string' ? output : JSON.stringify(output);
}

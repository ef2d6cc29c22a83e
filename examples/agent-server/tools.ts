/**
 * The agent's tools, each run through `turn.tool` so history records the call before it runs and
 * a stop gives it an aborted output:
 * - `crunch`: CPU work in a `TurnPool` worker (crunch-task.ts), stopped at its next `checkpoint()`;
 * - `shell`:  a process tree through `exec`; a stop kills its whole process group;
 * - `ask`:    `turn.ask`, answered from the page; a stop rejects the pending question.
 */
import { exec, ToolError, type ExecResult, type Turn, type TurnPool } from '../../src/index.js';
import type { CrunchResult, CrunchTask } from './crunch-task.js';
import type { ToolCall } from './model.js';

/** The `shell` tool's command: two sleepers and the shell waiting on them, about 30 s. */
export const SHELL_SCRIPT = 'sleep 30 & sleep 30 & wait';
/** The most phases a crunch may ask for (about 100 s). */
const MAX_PHASES = 1000;

/** What `shell` returns to the model: the facts of the run (a non-zero exit is not an error). */
export type ShellOutput = Pick<ExecResult, 'exitCode' | 'signal' | 'stdout' | 'stderr' | 'wallMs' | 'pid'>;

/** Runs one tool call of a turn; rejects as `turn.tool` does (a `ToolError` for a bad call). */
export function runTool(turn: Turn, pool: TurnPool, call: ToolCall): Promise<unknown> {
  switch (call.name) {
    case 'crunch':
      return turn.tool('crunch', call.args, async (token) => {
        const phases = call.args.phases ?? 100;
        if (!Number.isInteger(phases) || (phases as number) < 1 || (phases as number) > MAX_PHASES) {
          throw new ToolError(`crunch: phases: expected an integer from 1 to ${MAX_PHASES}, got ${JSON.stringify(phases)}`);
        }
        return pool.run<CrunchResult>({ phases: phases as number } satisfies CrunchTask, { token });
      });
    case 'shell':
      return turn.tool('shell', { command: `sh -c '${SHELL_SCRIPT}'` }, async (token): Promise<ShellOutput> => {
        const { exitCode, signal, stdout, stderr, wallMs, pid } = await exec('sh', ['-c', SHELL_SCRIPT], { token });
        // exec resolves a stopped run with its partial output; for the agent a stopped command is
        // an aborted call, so the stop writes its aborted output instead of this one.
        token.throwIfCancelled();
        return { exitCode, signal, stdout, stderr, wallMs, pid };
      });
    case 'ask':
      return turn.tool('ask', call.args, (token) => {
        const question = call.args.question;
        if (typeof question !== 'string' || question.length === 0) {
          return Promise.reject(new ToolError(`ask: question: expected a non-empty string, got ${JSON.stringify(question)}`));
        }
        // The call settles as soon as the stop signals, so the stop's grace window does not wait
        // for the question: the hard stop rejects the question itself a moment later.
        return new Promise((resolve, reject) => {
          const onAbort = () => reject(token.signal.reason);
          token.signal.addEventListener('abort', onAbort, { once: true });
          turn.ask(question).then((answer) => resolve({ answer }), reject)
            .finally(() => token.signal.removeEventListener('abort', onAbort));
        });
      });
    default:
      return turn.tool(String(call.name) || 'unknown', call.args, () => Promise.reject(
        new ToolError(`no tool named ${JSON.stringify(call.name)}; the tools are crunch, shell and ask`),
      ));
  }
}

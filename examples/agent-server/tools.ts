/**
 * The agent's tools, as AI SDK tools. agent.ts hands `crunch` and `ask` to `streamText` through
 * `aiTools(turn, …)` (fullstop/ai-sdk), so each call runs as one `turn.tool` call under the
 * model's own tool-call id: history records the call before it runs, the call's token is ambient
 * (`pool.run` needs no token argument), and a stop gives it an aborted output. `shell` makes its
 * `turn.tool` call itself, for the call's `progress`:
 * - `crunch`: CPU work in a `TurnPool` worker (crunch-task.ts), stopped at its next `checkpoint()`;
 * - `shell`:  a process tree through `exec`, whose output goes out as it comes (`onOutput` →
 *             `call.progress` → the runner's `tool_progress` → the page); a stop kills its whole
 *             process group, and the history keeps what it had printed (`partial`), for the model;
 * - `ask`:    `turn.ask`, answered from the page; a stop rejects the pending question.
 */
import { tool, type ToolSet } from 'ai';
import { z } from 'zod';
import { exec, ToolError, type ExecResult, type Turn, type TurnPool } from '../../src/index.js';
import type { CrunchResult, CrunchTask } from './crunch-task.js';

/**
 * The `shell` tool's command: a line of output, then two sleepers and the shell waiting on them,
 * about 30 s (`echo` is the shell's own, so the tree is the shell and the two sleeps).
 */
export const SHELL_SCRIPT = "echo 'two sleepers started, 30 s'; sleep 30 & sleep 30 & wait; echo 'both sleepers done'";
/** The most phases a crunch may ask for (about 100 s). */
const MAX_PHASES = 1000;

/** What `shell` returns to the model: the facts of the run (a non-zero exit is not an error). */
export type ShellOutput = Pick<ExecResult, 'exitCode' | 'signal' | 'stdout' | 'stderr' | 'wallMs' | 'pid'>;

/** The three tools for one turn. */
/** `crunch` and `ask`, for `aiTools(turn, …)`. */
export function agentTools(turn: Turn, pool: TurnPool) {
  return {
    crunch: tool({
      description: 'Run a CPU-heavy computation (a SHA-256 hash chain) in a worker thread: about 0.1 s per phase.',
      // Checked in `execute`, not by the schema, so a bad value is a refused call in the history.
      inputSchema: z.object({ phases: z.number().optional().describe('How many phases, 1-1000 (default 100, about 10 s).') }),
      execute: async (args): Promise<CrunchResult> => {
        const phases = args.phases ?? 100;
        if (!Number.isInteger(phases) || phases < 1 || phases > MAX_PHASES) {
          throw new ToolError(`crunch: phases: expected an integer from 1 to ${MAX_PHASES}, got ${JSON.stringify(phases)}`);
        }
        return pool.run<CrunchResult>({ phases } satisfies CrunchTask);
      },
    }),
    ask: tool({
      description: 'Ask the user a question and wait for the answer.',
      inputSchema: z.object({ question: z.string() }),
      execute: async ({ question }, { abortSignal }): Promise<{ answer: string }> => {
        if (question.length === 0) throw new ToolError('ask: question: expected a non-empty string');
        // The call settles as soon as the stop signals, so the stop's grace window does not wait
        // for the question: the hard stop rejects the question itself a moment later.
        return new Promise((resolve, reject) => {
          const onAbort = () => reject(abortSignal!.reason);
          abortSignal?.addEventListener('abort', onAbort, { once: true });
          turn.ask(question).then((answer) => resolve({ answer: String(answer) }), reject)
            .finally(() => abortSignal?.removeEventListener('abort', onAbort));
        });
      },
    }),
  } satisfies ToolSet;
}

/**
 * `shell`, bound to the turn: one `turn.tool` call under the model's tool-call id, whose command's
 * output is reported as it comes (`call.progress`), so the page shows it live and a stop records
 * what it had printed for the next turn's model.
 */
export function shellTool(turn: Turn) {
  return tool({
    description: `Run \`sh -c "${SHELL_SCRIPT}"\`: a process tree that runs about 30 s, printing a line before and after.`,
    inputSchema: z.object({}),
    execute: (args, { toolCallId }): Promise<ShellOutput> => turn.tool('shell', args, async (token, call) => {
      const { exitCode, signal, stdout, stderr, wallMs, pid } = await exec('sh', ['-c', SHELL_SCRIPT], {
        token,
        onOutput: (chunk) => call.progress(chunk),
      });
      // exec resolves a stopped run with its partial output; for the agent a stopped command is
      // an aborted call (its output so far is on the call's history through progress).
      token.signal.throwIfAborted();
      return { exitCode, signal, stdout, stderr, wallMs, pid };
    }, { callId: toolCallId }),
  });
}

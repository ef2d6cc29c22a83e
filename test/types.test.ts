/**
 * The public types hold what they promise: typed runner events (an unknown event or field does not
 * compile) and a TurnOutcome narrowed by its status. test/types/ is compiled against the build.
 */
import { describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

describe('the public types', () => {
  it('compile what they allow and refuse what they do not (test/types/runner-events.ts)', async () => {
    const project = fileURLToPath(new URL('./types/tsconfig.json', import.meta.url));
    const tsc = fileURLToPath(new URL('../node_modules/typescript/bin/tsc', import.meta.url));
    const run = promisify(execFile)(process.execPath, [tsc, '-p', project], { encoding: 'utf8' });
    await expect(run).resolves.toMatchObject({ stdout: '' });
  });
});

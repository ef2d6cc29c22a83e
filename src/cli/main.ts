#!/usr/bin/env node
/**
 * The `fullstop` command. One subcommand today: `fullstop probe` (src/cli/probe.ts).
 *
 * Exit codes: 0 after a probe, whatever it found; 2 for bad input, with one line on stderr and
 * no stack trace; 130 when Ctrl-C stopped the probe; 1 for a fault of the probe itself.
 */

import { probeCommand } from './probe.js';
import { Interrupted } from './runs.js';
import { HELP, UsageError } from './usage.js';

async function main(argv: readonly string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === '--help' || command === '-h' || command === 'help') {
    process.stdout.write(HELP + '\n');
    return 0;
  }
  if (command !== 'probe') throw new UsageError(command === undefined ? 'expected a command: fullstop probe --help' : `unknown command ${JSON.stringify(command)}: expected "probe" (fullstop probe --help)`);
  return probeCommand(rest);
}

const argv = process.argv.slice(2);
const prefix = argv[0] === 'probe' ? 'fullstop probe' : 'fullstop';

main(argv).then(
  (code) => { process.exitCode = code; },
  (e: unknown) => {
    if (e instanceof UsageError) {
      process.stderr.write(`${prefix}: ${e.message}\n`);
      process.exitCode = 2;
    } else if (e instanceof Interrupted) {
      process.stderr.write('fullstop probe: interrupted; everything it started has been stopped\n');
      process.exitCode = 130;
    } else {
      process.stderr.write(`${prefix}: internal error: ${e instanceof Error ? e.message : String(e)}\n`);
      process.exitCode = 1;
    }
  },
);

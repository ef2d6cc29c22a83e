/** What a probe run yields, shared by both modes, and the probe's own interruption. */

/** One cancelled run: how long from the cancel until it settled, and whether the hard stop was needed. */
export interface Run {
  latencyMs: number;
  /** Task mode: the worker was terminated. Exec mode: SIGKILL was sent. */
  hard: boolean;
}

/** The user pressed Ctrl-C: the probe stopped what it ran and exits 130. */
export class Interrupted extends Error {
  override readonly name = 'Interrupted';
  constructor() {
    super('interrupted');
  }
}

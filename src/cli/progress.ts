/**
 * The progress bar on stderr, drawn only when stderr is a terminal: piped or redirected output
 * gets nothing from it (the table on stdout stays clean, and a log file gets no control codes).
 */

import cliProgress from 'cli-progress';

export interface Progress {
  /** What the probe is doing now (shown beside the bar). */
  phase(text: string): void;
  /** `done` of the cancelled runs are measured. */
  tick(done: number): void;
  stop(): void;
}

/** A bar for `total` runs, or one that draws nothing when `stream` is not a TTY. */
export function progressBar(total: number, stream: NodeJS.WriteStream = process.stderr): Progress {
  if (!stream.isTTY) return { phase() {}, tick() {}, stop() {} };
  const bar = new cliProgress.SingleBar({
    stream, format: 'probing {bar} {value}/{total} runs | {phase}', hideCursor: true, clearOnComplete: true,
  }, cliProgress.Presets.shades_classic);
  bar.start(total, 0, { phase: 'starting' });
  let stopped = false;
  return {
    phase: (text) => bar.update({ phase: text }),
    tick: (done) => bar.update(done),
    stop: () => {
      if (!stopped) bar.stop();
      stopped = true;
    },
  };
}

/**
 * Where each line of a file `Ledger` goes, decided as it is queued (ledger.ts, invariants 2 and
 * 9): its seq, the next in call order; its byte range in the session index's offsets, which run
 * across segments; and whether the file being written is sealed before it. Lines are written in
 * queue order at the end of the file, so the offsets are exact while no write has failed, and
 * the sealing is decided here so that the next line's offset is known at once.
 */

import type { LedgerFiles } from './files.js';
import type { LoadedLedger } from './load.js';
import { sealedPath, type PlacedSegment } from './segments.js';
import type { SessionIndex } from './session-index.js';
import type { Rotate } from './writer.js';

export class LinePlacement {
  readonly #files: LedgerFiles;
  readonly #index: SessionIndex;
  /** Seal the file being written once it holds this many bytes; `undefined`: never. */
  readonly #segmentBytes: number | undefined;
  /** Where the file being written starts in the index's offsets, and the seq of its first line. */
  #activeBase: number;
  #activeFirstSeq: number;
  /** The last seq assigned (0 for an empty file). */
  #seq: number;
  /** The offset (index space) where the next queued line will be written. */
  #end: number;

  constructor(files: LedgerFiles, index: SessionIndex, segmentBytes: number | undefined, loaded: LoadedLedger) {
    this.#files = files;
    this.#index = index;
    this.#segmentBytes = segmentBytes;
    this.#activeBase = loaded.activeBase;
    this.#activeFirstSeq = loaded.activeFirstSeq;
    this.#seq = loaded.seq;
    this.#end = loaded.activeBase + loaded.completeBytes;
  }

  /** The last seq assigned (0 for an empty file). */
  get seq(): number { return this.#seq; }

  /** Where the file being written starts in the index's offsets (`LedgerFiles.currentBase`). */
  currentBase(): number {
    return this.#files.currentBase(this.#activeBase);
  }

  /**
   * Places a line of `bytes` of `sessionId` under the next seq (`seq` is then its seq); returns the
   * sealing the writer runs before writing it, if the file being written is full.
   */
  place(sessionId: string, bytes: number): Rotate | undefined {
    this.#seq += 1;
    const rotate = this.#segmentBytes !== undefined && this.#end - this.#activeBase >= this.#segmentBytes ? this.#sealAt(this.#seq) : undefined;
    const start = this.#end;
    this.#end += bytes;
    this.#index.add(sessionId, start, this.#end, this.#seq);
    return rotate;
  }

  /**
   * The file being written is sealed before the line of `seq`: its segment is placed now (the
   * index's offsets of the next lines depend on it), renamed when the writer gets there.
   */
  #sealAt(seq: number): Rotate {
    const segment: PlacedSegment = {
      path: sealedPath(this.#files.real, this.#activeFirstSeq, seq - 1), firstSeq: this.#activeFirstSeq, lastSeq: seq - 1,
      bytes: this.#end - this.#activeBase, base: this.#activeBase,
    };
    this.#activeBase = this.#end + 1;
    this.#end = this.#activeBase;
    this.#activeFirstSeq = seq;
    return this.#files.seal(segment);
  }
}

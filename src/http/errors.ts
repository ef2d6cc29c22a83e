/** The errors of `fullstop/http`, each with a stable `code`. */

/** The body of an `eventStream` dropped because its client did not read (`maxBufferedBytes`): its consumer closes the connection. */
export class StreamDroppedError extends Error {
  readonly code = 'ERR_FULLSTOP_STREAM_DROPPED';
  override readonly name = 'StreamDroppedError';
}

/** The reason `toRequest`'s signal aborts with: the client closed the connection before the response was done. */
export class ClientGoneError extends Error {
  readonly code = 'ERR_FULLSTOP_CLIENT_GONE';
  override readonly name = 'ClientGoneError';
}

/** A request body the caller answers with `status` (400 not JSON or bad fields, 413 too large). Not exported from the subpath. */
export class BodyRefusal extends Error {
  readonly code = 'ERR_FULLSTOP_HTTP_BODY';
  override readonly name = 'BodyRefusal';
  constructor(readonly status: 400 | 413, message: string) {
    super(message);
  }
}

/**
 * The fleet's own errors (the rest of fullstop's are in src/errors.ts).
 */

/** Redis could not be reached in time to register (or stop) a fleet turn. `cause` says why. */
export class FleetUnavailableError extends Error {
  override readonly name = 'FleetUnavailableError';
}

/**
 * A fleet turn could not be registered: the session already has a live turn (on this or another
 * instance), or the turn id is already recorded.
 */
export class FleetTurnRefusedError extends Error {
  override readonly name = 'FleetTurnRefusedError';
}

/**
 * The fleet's own errors (the rest of fullstop's are in src/errors.ts). A fleet turn refused
 * because its session is busy is a `SessionBusyError` (the one way fullstop says "busy"); one
 * refused because its id is taken is a `TurnIdUsedError`.
 */
import { ErrorCodes } from '../constants.js';
import { SessionBusyError } from '../errors.js';

/** Redis could not be reached in time to register (or stop) a fleet turn. `cause` says why. */
export class FleetUnavailableError extends Error {
  override readonly name: string = 'FleetUnavailableError';
  /** `'ERR_FULLSTOP_FLEET_UNAVAILABLE'` */
  readonly code: string = ErrorCodes.fleetUnavailable;
}

/** `fleet.run` was called after `fleet.close()`: it started nothing. */
export class FleetClosedError extends Error {
  override readonly name: string = 'FleetClosedError';
  /** `'ERR_FULLSTOP_FLEET_CLOSED'` */
  readonly code: string = ErrorCodes.fleetClosed;
}

/**
 * A fleet turn could not be registered because its session already has a live fleet turn, on
 * this instance or another (`code` `'ERR_FULLSTOP_SESSION_BUSY'`, as every "busy").
 */
export class FleetTurnRefusedError extends SessionBusyError {
  override readonly name: string = 'FleetTurnRefusedError';
}

/**
 * `fullstop/fleet`: stop a turn from any server instance, over Redis (node-redis, an optional
 * peer dependency: only this entry point needs it, and it only uses the client it is given).
 * See docs/fleet.md.
 */

export { Fleet } from './fleet.js';
export { FleetClient } from './fleet-client.js';
export type { FleetOptions, FleetStopOptions, FleetRunOptions, FleetAnswerOptions, FleetClientOptions } from './options.js';
export type { FleetRedisClient, FleetSingleClient, FleetClusterClient, FleetMessageListener } from './client.js';
export { clusterRootNodes, type ClusterRootNode } from './root-nodes.js';
export type { FleetTurn, FleetTurnStatus, StopAnswer, FleetOutcome, AnswerReply } from './answers.js';
export { FleetReasons } from '../constants.js';
export { FleetUnavailableError, FleetTurnRefusedError, FleetClosedError } from './errors.js';

/**
 * `fullstop/otel`: OpenTelemetry traces and metrics for a `TurnRunner` (docs/otel.md).
 * `@opentelemetry/api` 1.x is an optional peer dependency, loaded by this subpath only.
 */

export { instrument, type InstrumentOptions } from './instrument.js';

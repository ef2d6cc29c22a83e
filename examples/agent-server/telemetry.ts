/**
 * OpenTelemetry for the server, on when `OTEL_EXPORTER_OTLP_ENDPOINT` is set: the SDK
 * (`@opentelemetry/sdk-node`, configured by the standard `OTEL_*` variables: OTLP over HTTP by
 * default) becomes the global tracer and meter provider, and `fullstop/otel` reports the runner's
 * turns, tool calls and stops through it (`invoke_agent` and `execute_tool` spans, the
 * `fullstop.stop` event, `fullstop.stop.duration` and `fullstop.stop.hard`). Both are imported
 * only then, so the server runs without them.
 */
import type { TurnRunner } from '../../src/index.js';

/** The variable that turns telemetry on. */
export const OTEL_ENDPOINT_ENV = 'OTEL_EXPORTER_OTLP_ENDPOINT';

/** Telemetry running: `close` removes the runner's listeners and flushes what is left to the collector. */
export interface Telemetry {
  readonly endpoint: string;
  close(): Promise<void>;
}

/** Starts telemetry for `runner` when the environment asks for it; `undefined` otherwise. */
export async function startTelemetry(runner: TurnRunner, env: NodeJS.ProcessEnv = process.env): Promise<Telemetry | undefined> {
  const endpoint = env[OTEL_ENDPOINT_ENV];
  if (endpoint === undefined || endpoint === '') return undefined;
  const { NodeSDK } = await import('@opentelemetry/sdk-node');
  const sdk = new NodeSDK({ serviceName: env.OTEL_SERVICE_NAME ?? 'fullstop-agent-server' });
  sdk.start();
  const { instrument } = await import('../../src/otel/index.js');
  // No providers given: the global ones sdk.start() has just registered.
  const off = instrument(runner);
  return {
    endpoint,
    async close() {
      off();
      await sdk.shutdown();
    },
  };
}

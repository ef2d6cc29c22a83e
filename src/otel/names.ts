/**
 * The names fullstop/otel emits: OpenTelemetry's GenAI conventions where they have one
 * (`invoke_agent`, `execute_tool`, `gen_ai.*`), `fullstop.*` for what only a stop knows.
 * One place, so docs/otel.md, the code and the tests spell each name the same way.
 */

/** Span names: the turn's, and the prefix of a tool call's (`execute_tool <name>`). */
export const TURN_SPAN = 'invoke_agent';
export const TOOL_SPAN = 'execute_tool';

/** Span attributes. */
export const Attr = {
  operation: 'gen_ai.operation.name',
  conversationId: 'gen_ai.conversation.id',
  turnId: 'fullstop.turn.id',
  turnStatus: 'fullstop.turn.status',
  toolName: 'gen_ai.tool.name',
  toolCallId: 'gen_ai.tool.call.id',
  toolStatus: 'fullstop.tool.status',
  errorType: 'error.type',
} as const;

/** The event a stopped turn's span gets, and its attributes. */
export const STOP_EVENT = 'fullstop.stop';
export const StopAttr = {
  reason: 'fullstop.stop.reason',
  detail: 'fullstop.stop.detail',
  graceMs: 'fullstop.stop.grace_ms',
  settledCooperatively: 'fullstop.stop.settled_cooperatively',
} as const;

/** The StopReport's phase times, each as `fullstop.stop.<phase>_ms`, in the order of the stop. */
export const STOP_PHASES = [
  ['signalled', 'signalledAt'],
  ['settled', 'settledAt'],
  ['hard_stop', 'hardStopAt'],
  ['marker', 'markerAt'],
  ['flushed', 'flushedAt'],
  ['emitted', 'emittedAt'],
] as const;

/** Instruments, and the counter's attribute. */
export const STOP_DURATION = 'fullstop.stop.duration';
export const STOP_HARD = 'fullstop.stop.hard';
export const HARD_KIND = 'fullstop.hard.kind';

/** The instrumentation scope of the tracer and the meter. */
export const SCOPE = 'fullstop';

/**
 * `fullstop/ai-sdk`: the Vercel AI SDK (ai 5 and later) in a turn. `aiTools` runs the model's tool
 * calls as the turn's tool calls; `toModelMessages` turns the session's history back into the
 * prompt of the next request. Neither loads `ai`: the SDK stays an optional peer.
 */

export { aiTools, type ToolExecutionOptions } from './tools.js';
export {
  toModelMessages, PARTIAL_OUTPUT_HEADING, type ToModelMessagesOptions, type ModelMessage, type UserModelMessage, type AssistantModelMessage, type ToolModelMessage,
  type TextPart, type ToolCallPart, type ToolResultPart, type JsonValue,
} from './messages.js';

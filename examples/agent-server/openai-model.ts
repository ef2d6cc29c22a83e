/**
 * The model behind an OpenAI-compatible endpoint, through the AI SDK's own provider
 * (`@ai-sdk/openai`, its Chat Completions model, which every compatible server speaks): used when
 * `OPENAI_BASE_URL` is set (with `OPENAI_API_KEY` and `MODEL`). The provider is imported only
 * then. agent.ts gives `streamText` `abortSignal: turn.signal`, so a stop closes the HTTP stream at
 * once instead of waiting for the model to finish its sentence.
 */
import type { LanguageModelV3 } from '@ai-sdk/provider';

/** Reads `OPENAI_BASE_URL`, `OPENAI_API_KEY` and `MODEL` (default `gpt-4o-mini`). */
export async function openAIModelFromEnv(env: NodeJS.ProcessEnv = process.env): Promise<LanguageModelV3> {
  const { createOpenAI } = await import('@ai-sdk/openai');
  const provider = createOpenAI({ baseURL: env.OPENAI_BASE_URL, apiKey: env.OPENAI_API_KEY ?? 'unset' });
  return provider.chat(env.MODEL ?? 'gpt-4o-mini');
}

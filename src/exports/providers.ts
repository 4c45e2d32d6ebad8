/**
 * `agent-tools/providers`: models over HTTP (Anthropic's Messages API, OpenAI's Chat Completions and
 * Responses APIs, and any server that speaks them) and `Model`, which makes a `LanguageModel` layer
 * from a model string (`anthropic/claude-...`, `openai/gpt-...`, `scripted`).
 */
export * as Model from "../Model.js"
export * as Anthropic from "../providers/Anthropic.js"
export * as OpenAi from "../providers/OpenAi.js"
export * as OpenAiResponses from "../providers/OpenAiResponses.js"
export * as StrictSchema from "../providers/StrictSchema.js"

import { providerSuite } from "../support/providerSuite.js"

providerSuite({
  provider: "openai",
  model: "openai:gpt-4.1",
  keyVariable: "OPENAI_API_KEY",
  key: "sk-test-0123456789abcdef7890",
  env: (url) => ({ OPENAI_API_KEY: "sk-test-0123456789abcdef7890", OPENAI_BASE_URL: `${url}/v1` }),
  path: "/v1/chat/completions",
  sentKey: (headers) => (headers.authorization as string | undefined)?.replace(/^Bearer /, ""),
  requiredHeaders: { "content-type": "application/json" },
  toolsOf: (body) => body.tools.map((tool: any) => (tool.type === "function" ? tool.function : tool)),
  fixtures: {
    toolCalls: "response_tool_calls",
    text: "response_text",
    turn2: "request_turn2",
    invalid: "error_invalid_request",
    rateLimit: "error_rate_limit",
    server: "error_server",
    auth: "error_authentication"
  }
})

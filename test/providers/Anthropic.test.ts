import { providerSuite } from "../support/providerSuite.js"

providerSuite({
  provider: "anthropic",
  model: "anthropic:claude-sonnet-4-5",
  keyVariable: "ANTHROPIC_API_KEY",
  key: "sk-ant-test-0123456789abcdef",
  env: (url) => ({ ANTHROPIC_API_KEY: "sk-ant-test-0123456789abcdef", ANTHROPIC_BASE_URL: url }),
  path: "/v1/messages",
  sentKey: (headers) => headers["x-api-key"] as string | undefined,
  requiredHeaders: { "anthropic-version": "2023-06-01", "content-type": "application/json" },
  toolsOf: (body) =>
    body.tools.map((tool: any) => ({ name: tool.name, description: tool.description, parameters: tool.input_schema })),
  fixtures: {
    toolCalls: "response_tool_use",
    text: "response_text",
    turn2: "request_turn2",
    invalid: "error_invalid_request",
    rateLimit: "error_rate_limit",
    server: "error_api",
    auth: "error_authentication"
  },
  overloaded: { status: 529, fixture: "error_overloaded" }
})

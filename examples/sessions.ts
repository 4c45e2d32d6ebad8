/** A session: three runs of one conversation, the model reading the earlier runs' turns within a history policy. */
import { Effect, Layer } from "effect"
import { Agent, Journal, LanguageModel } from "../src/index.js"
import * as Shop from "./shop.js"
import { lookupOrder } from "./tools.js"

// #region agent
export const agent = Agent.make({
  tools: [lookupOrder],
  history: {
    lastTurns: 10, // at most the last 10 runs of the session
    maxTokens: 8_000, // the newest of them within 8,000 tokens (estimated: 4 characters a token)
    // Past the budget, the oldest turns are summarized once; the summary is kept in the session, read first.
    summarize: ({ messages, summary }) => Effect.succeed(`${summary ?? ""} ${messages.length} earlier messages`)
  }
})
// #endregion

/** Each answer says how many messages the model read. */
export const model = LanguageModel.layerScripted([
  { toolCalls: [{ id: "c1", name: "lookup_order", arguments: "{\"order_id\":\"ord-4821\"}" }] },
  (request) => ({ text: `read ${request.messages.length} messages` }),
  (request) => ({ text: `read ${request.messages.length} messages` }),
  (request) => ({ text: `read ${request.messages.length} messages` })
])

/** Three runs of the session `s-42` in the journal `file`; gives their outputs. */
export const main = (file: string) =>
  Effect.gen(function*() {
    // #region run
    const first = yield* Agent.run(agent, "Where is ord-4821?", { session: "s-42" })
    const second = yield* Agent.run(agent, "When did it ship?", { session: "s-42" }) // reads the first run's turn
    const third = yield* Agent.run(agent, "Thanks!", { session: "s-42" }) // reads both
    // #endregion
    return [first.output, second.output, third.output]
  }).pipe(
    // #region journal
    Effect.provide(Layer.mergeAll(
      Journal.layerSql({ filename: file }), // a session's turns are kept in the run journal: memory, SQLite, PostgreSQL
      Shop.layer,
      model
    ))
    // #endregion
  )

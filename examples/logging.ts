/** A program's own log level: the library logs through Effect's logger, and reads no setting for it. */
import { Config, Effect, Layer, Logger, LogLevel, Schema } from "effect"
import { Tool } from "../src/index.js"

const lookup = Tool.make("lookup_order", {
  description: "Return the order record for order_id.",
  input: { order_id: Schema.String },
  output: Schema.Struct({ id: Schema.String }),
  timeout: "5 seconds"
}, ({ order_id }) => Effect.logDebug(`looking up ${order_id}`).pipe(Effect.as({ id: order_id })))

// #region log-level
// One effect, debug lines included (Effect's default minimum is info):
export const verbose = Tool.test(lookup, { order_id: "ord-1" }).pipe(Logger.withMinimumLogLevel(LogLevel.Debug))

// A whole program, warnings and worse only: a layer, provided once at the edge.
export const quiet = Logger.minimumLogLevel(LogLevel.Warning)

// Or LOG_LEVEL, as the CLI reads it (all, trace, debug, info, warn, error, fatal, off; default info):
export const fromEnv = Layer.unwrapEffect(
  Effect.map(Config.withDefault(Config.logLevel("LOG_LEVEL"), LogLevel.Info), Logger.minimumLogLevel)
)
// program.pipe(Effect.provide(fromEnv))
// #endregion

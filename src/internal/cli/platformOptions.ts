/**
 * The `platform` command's options (and `platform migrate`'s `--database`), as @effect/cli parses them: main.ts
 * reads them into the platform's layer.
 */
import * as Options from "@effect/cli/Options"
import * as Cli from "../cli.js"
import { modelOption } from "./options.js"

/** The cluster's PostgreSQL URL (a secret: it carries a password), from `--database` or `PLATFORM_DATABASE`. */
export const databaseOption = Options.text("database").pipe(
  Options.withDescription(
    "cluster mode: the PostgreSQL URL of the cluster's storage, postgres://user:password@host:port/db " +
      "(default: PLATFORM_DATABASE; unset: one process, embedded)"
  ),
  Options.optional
)

/** The options of `platform`. */
export const platformOptions = {
  port: Cli.portOption("port", 8787, "the port to listen on, 0 for any free one"),
  host: Options.text("host").pipe(Options.withDescription("the address to bind"), Cli.withDefault("127.0.0.1")),
  tokens: Options.text("tokens").pipe(
    Options.withDescription(
      "token:agent pairs, comma-separated (default: PLATFORM_TOKENS; every local user sees a command line: " +
        "prefer PLATFORM_TOKENS or --tokens-file)"
    ),
    Options.optional
  ),
  tokensFile: Options.file("tokens-file", { exists: "yes" }).pipe(
    Options.withDescription("a file of token:agent pairs, one a line or comma-separated"),
    Options.optional
  ),
  journal: Options.text("journal").pipe(
    Options.withDescription(
      "a SQLite file journaling the tasks, so that a restarted platform resumes the unfinished ones " +
        "(default: PLATFORM_JOURNAL; unset: in memory)"
    ),
    Options.optional
  ),
  config: Options.file("config", { exists: "yes" }).pipe(
    Options.withDescription(
      "a JSON (or YAML) file of the agents' models, instructions, maxSteps, limits, agent calls, approvals and tokens; " +
        "SIGHUP reads it again"
    ),
    Options.optional
  ),
  model: modelOption,
  database: databaseOption,
  runnerHost: Options.text("runner-host").pipe(
    Options.withDescription("cluster mode: the address other runners reach this one at"),
    Cli.withDefault("127.0.0.1")
  ),
  runnerPort: Cli.portOption("runner-port", 34431, "cluster mode: the port runners talk to each other on"),
  metrics: Options.boolean("metrics").pipe(
    Options.withDescription("serve the metrics as Prometheus text at /metrics on the platform's port (unauthenticated)")
  ),
  placement: Options.choice("placement", ["submitter", "id"]).pipe(
    Options.withDescription(
      "cluster mode: where a new task runs. submitter: on the runner its serving process is connected to. " +
        "id: spread over the runners by its id."
    ),
    Cli.withDefault("submitter")
  ),
  console: Options.boolean("console").pipe(
    Options.withDescription("serve the console, browser pages at /console on the operator API (needs PLATFORM_OPERATOR_TOKENS)")
  ),
  traceUrl: Options.text("trace-url").pipe(
    Options.withDescription("the console's link of a trace id: a URL with {traceId} in it (Jaeger, Tempo, Honeycomb)"),
    Options.optional
  )
}


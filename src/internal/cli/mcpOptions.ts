/**
 * The `mcp` command's own options beyond `--http`, `--port` and `--tools`: where `mcp --http` keeps its tasks
 * (`--journal`, `MCP_JOURNAL`). Imports Effect module by module, as main.ts does (start-up time).
 */
import * as Options from "@effect/cli/Options"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { optionalString } from "../util/settings.js"

/** `--journal`: the SQLite file of the MCP tasks (with `--http`). */
export const mcpJournalOption = Options.text("journal").pipe(
  Options.withDescription(
    "with --http: a SQLite file keeping the MCP tasks (task-augmented tools/call), so that a restarted server " +
      "answers for them and takes back those left running (default: MCP_JOURNAL; unset: no tasks)"
  ),
  Options.optional
)

/** The MCP tasks' file: `--journal`, else `MCP_JOURNAL`, else none (tasks are not offered). */
export const chooseMcpJournal = (option: Option.Option<string>): Effect.Effect<string | undefined> =>
  Option.isSome(option)
    ? Effect.succeed(option.value)
    : Effect.map(optionalString("MCP_JOURNAL"), Option.getOrUndefined)

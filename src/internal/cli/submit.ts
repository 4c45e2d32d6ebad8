/**
 * `agent-tools submit --agent A "prompt"`: a task submitted as a client of agent A (a submitter: it registers
 * nothing; the agent's serving processes run the calls), its events followed and printed (the model's text as
 * it writes it, each call, the end), or with `--json` as JSON lines, the protocol's encoding. It ends with the
 * task: completed is exit 0, failed (or cancelled) is exit 1. `--detach` prints the task's id once the platform
 * has it, and ends. The platform at `--url` or `PLATFORM_URL`, the agent's token `--token` or `PLATFORM_TOKEN`.
 * Imports Effect module by module, as main.ts does (start-up time); the platform's client when it runs.
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Mailbox from "effect/Mailbox"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import type { TaskEvent } from "../../protocol/Protocol.js"
import { runCommand } from "./command.js"
import { load } from "./load.js"
import { json, line, write } from "./print.js"
import { agentIdSetting } from "./settings.js"

/** The task ended without an answer: failed, cancelled, or its stream taken over by another client. */
export class TaskNotCompleted extends Data.TaggedError("TaskNotCompleted")<{
  readonly taskId: string
  readonly reason: string
}> {
  override get message(): string {
    return `task ${this.taskId}: ${this.reason}`
  }
}

/** The `submit` command's options. */
export interface SubmitOptions {
  readonly prompt: string
  readonly agent: Option.Option<string>
  readonly url: Option.Option<string>
  readonly token: Option.Option<string>
  readonly detach: boolean
  readonly json: boolean
}

/** Prints one event as a person reads it; `state` carries whether the current turn's text came as deltas. */
const human = (event: TaskEvent, state: { streamed: boolean; open: boolean }): Effect.Effect<void> => {
  const endLine = state.open ? (state.open = false, write("\n")) : Effect.void
  switch (event._tag) {
    case "TaskStarted":
      return line(`task ${event.taskId} started`)
    case "TurnStarted":
      state.streamed = false
      return endLine
    case "ModelTextDelta":
      state.streamed = true
      state.open = !event.text.endsWith("\n")
      return write(event.text)
    case "ModelText":
      return state.streamed ? endLine : Effect.zipRight(endLine, line(event.text))
    case "TurnRetried":
      return Effect.zipRight(endLine, line(`⟳ turn ${event.step} asked again: ${event.reason}`))
    case "ToolCallStarted":
      return Effect.zipRight(endLine, line(`→ ${event.name} (${event.toolCallId})`))
    case "ToolCallCompleted": {
      const { error, success, value } = event.result
      const text = success ? JSON.stringify(value) : error
      return Effect.zipRight(endLine, line(`${success ? "✓" : "✗"} ${event.name} (${event.toolCallId}): ${text}`))
    }
    case "TaskSuspended":
      return Effect.zipRight(
        endLine,
        Effect.forEach(event.pending, (p) =>
          line(
            `⏸ waits for approval of ${p.toolName} ${JSON.stringify(p.input)} (${p.toolCallId}): ` +
              `agent-tools approvals approve ${event.taskId} ${p.toolCallId}`
          ), { discard: true })
      )
    case "TaskWaiting":
      return Effect.zipRight(endLine, line(`… ${event.reason}`))
    case "SubTaskStarted":
      return Effect.zipRight(endLine, line(`↳ task ${event.childTaskId} of agent ${event.agentId} (${event.toolCallId})`))
    case "SubTaskEnded":
      return Effect.zipRight(endLine, line(`↲ task ${event.childTaskId} ${event.outcome}`))
    case "TaskCompleted":
      return Effect.zipRight(
        endLine,
        line(`✔ task ${event.taskId} completed (${event.steps} turns, ${event.usage.inputTokens} tokens in, ${event.usage.outputTokens} out)`)
      )
    case "TaskFailed":
      return Effect.zipRight(endLine, line(`✗ task ${event.taskId} failed: ${event.reason}`))
    case "TaskCancelled":
      return Effect.zipRight(
        endLine,
        line(`✗ task ${event.taskId} cancelled by ${event.by}${event.reason === "" ? "" : `: ${event.reason}`}`)
      )
    case "TaskTakenOver":
      return Effect.zipRight(endLine, line(`task ${event.taskId} taken over: ${event.reason}`))
    default:
      return Effect.void
  }
}

/**
 * The `submit` command as one Layer: the task submitted through the platform's client (on the settings, `--url`,
 * `--token` and `--agent` over `PLATFORM_URL`, `PLATFORM_TOKEN` and `AGENT_ID`), then followed to its end.
 */
export const submitLayer = (options: SubmitOptions) =>
  Layer.unwrapEffect(Effect.gen(function*() {
    const [PlatformClient, Protocol, Ids, Schema] = yield* load(
      () => import("../../PlatformClient.js"),
      () => import("../../protocol/Protocol.js"),
      () => import("../../Ids.js"),
      () => import("effect/Schema")
    )
    if (Option.isSome(options.token)) {
      yield* Effect.logWarning("--token puts a secret on the command line, where every local user can read it; prefer PLATFORM_TOKEN")
    }
    const given = new Map<string, string>()
    if (Option.isSome(options.url)) given.set("PLATFORM_URL", options.url.value)
    if (Option.isSome(options.token)) given.set("PLATFORM_TOKEN", options.token.value)
    if (Option.isSome(options.agent)) given.set("AGENT_ID", options.agent.value)
    const current = yield* Effect.configProviderWith(Effect.succeed)
    const settings = ConfigProvider.orElse(ConfigProvider.fromMap(given), () => current)
    // Every missing setting at once, before anything connects.
    yield* Effect.withConfigProvider(PlatformClient.requireAll(["AGENT_ID", "PLATFORM_TOKEN", "PLATFORM_URL"]), settings)
    const agent = yield* Effect.withConfigProvider(agentIdSetting, settings)
    // An event as the protocol encodes it (a call's result as `{ value }` or `{ error }`), one JSON line.
    const encode = (event: TaskEvent) => Effect.flatMap(Effect.orDie(Schema.encode(Protocol.TaskEvent)(event)), json)
    const followed = Effect.gen(function*() {
      const client = yield* PlatformClient.PlatformClient
      const processId = yield* Ids.make("process")
      const mailbox = yield* client.submitTask({ agentId: agent, processId, prompt: options.prompt, events: "deltas" })
      const state = { streamed: false, open: false }
      let end: TaskEvent | undefined
      yield* Mailbox.toStream(mailbox).pipe(
        Stream.takeUntil((event) => options.detach ? event._tag === "TaskStarted" : isEnd(event)),
        Stream.runForEach((event) => {
          end = event
          if (options.detach) return options.json ? encode(event) : line(event.taskId)
          return options.json ? encode(event) : human(event, state)
        })
      )
      if (options.detach || end?._tag === "TaskCompleted") return
      return yield* new TaskNotCompleted({
        taskId: end?.taskId ?? "(none)",
        reason: end === undefined ? "its stream ended before the task did" : "reason" in end ? end.reason : end._tag
      })
    }).pipe(Effect.scoped)
    return Layer.effectDiscard(followed).pipe(
      Layer.provide(PlatformClient.layer),
      Layer.provide(Layer.setConfigProvider(settings))
    )
  }))

/** The events after which a task's stream has nothing more to say. */
const isEnd = (event: TaskEvent): boolean =>
  event._tag === "TaskCompleted" || event._tag === "TaskFailed" || event._tag === "TaskCancelled" ||
  event._tag === "TaskTakenOver"

/** The `submit` command. */
export const submit = Command.make("submit", {
  prompt: Args.text({ name: "prompt" }).pipe(Args.withDescription("what to ask the agent")),
  agent: Options.text("agent").pipe(Options.withDescription("the agent to submit as (default: AGENT_ID)"), Options.optional),
  url: Options.text("url").pipe(
    Options.withDescription("the platform's WebSocket URL, ws://host:port/rpc (default: PLATFORM_URL)"),
    Options.optional
  ),
  token: Options.text("token").pipe(
    Options.withDescription("the agent's platform token (default: PLATFORM_TOKEN; prefer it: every local user sees a command line)"),
    Options.optional
  ),
  detach: Options.boolean("detach").pipe(Options.withDescription("print the task's id once it is made, and end")),
  json: Options.boolean("json").pipe(Options.withDescription("print each event as a JSON line, as the protocol encodes it"))
}, (options) => runCommand(submitLayer(options))).pipe(
  Command.withDescription(
    "Submit a task as a client of an agent and follow it to its end (exit 0 completed, 1 failed or cancelled); " +
      "its calls are run by the agent's serving processes"
  )
)

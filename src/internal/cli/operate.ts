/**
 * `agent-tools tasks list|show|cancel`, `approvals list|approve|deny` and `agents`: the operator API
 * (`operatorApi.ts`) from the command line. Each prints the API's answer as a table or lines, or with `--json`
 * the API's JSON as it came; a refusal (401, 403, 404, 409, 501...) fails the command with the API's reason
 * (exit 1). Imports Effect module by module, as main.ts does (start-up time).
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { runCommand } from "./command.js"
import { type Access, access, accessOptions, request } from "./operatorApi.js"
import { fields, json, line, table } from "./print.js"

/** `--json`: the API's JSON as it answered, one line. */
const jsonOption = Options.boolean("json").pipe(Options.withDescription("print the API's JSON as it answered"))

/** What each operating command's options have: the access, and `--json`. */
interface Common {
  readonly url: Option.Option<string>
  readonly operatorToken: Option.Option<string>
  readonly json: boolean
}

/**
 * An operating command as one Layer: the access from the options and the settings, the request, and what it
 * answered printed, as JSON with `--json`, else by `human`.
 */
const operateLayer = (
  options: Common,
  ask: (to: Access) => ReturnType<typeof request>,
  human: (answer: any) => Effect.Effect<void>
) =>
  Layer.effectDiscard(Effect.gen(function*() {
    const answer = yield* ask(yield* access(options))
    yield* options.json ? json(answer) : human(answer)
  }))

/** A task of a listing (the API's `TaskSummary`). */
interface TaskRow {
  readonly taskId: string
  readonly agentId: string
  readonly status: string
  readonly outcome?: string
  readonly createdAt: string
  readonly endedAt?: string
}

const taskColumns: ReadonlyArray<readonly [string, (row: TaskRow) => unknown]> = [
  ["TASK", (t) => t.taskId],
  ["AGENT", (t) => t.agentId],
  ["STATUS", (t) => t.status],
  ["OUTCOME", (t) => t.outcome],
  ["CREATED", (t) => t.createdAt],
  ["ENDED", (t) => t.endedAt]
]

/** `tasks list`: a page of the tasks the journal holds, newest first. */
const list = Command.make("list", {
  ...accessOptions,
  json: jsonOption,
  agent: Options.text("agent").pipe(Options.withDescription("only this agent's tasks"), Options.optional),
  status: Options.choice("status", ["running", "waiting-for-approval", "ended"]).pipe(
    Options.withDescription("only tasks in this state"),
    Options.optional
  ),
  limit: Options.integer("limit").pipe(Options.withDescription("at most this many (1 to 200; default 50)"), Options.optional),
  cursor: Options.text("cursor").pipe(Options.withDescription("the next page: a listing's `next`"), Options.optional)
}, (options) => {
  const query = new URLSearchParams()
  for (const [name, value] of [["agent", options.agent], ["status", options.status], ["limit", options.limit], ["cursor", options.cursor]] as const) {
    if (Option.isSome<string | number>(value)) query.set(name, String(value.value))
  }
  const path = `/tasks${query.size === 0 ? "" : `?${query}`}`
  return runCommand(operateLayer(options, (to) => request(to, "GET", path), (page: { tasks: ReadonlyArray<TaskRow>; next?: string }) =>
    Effect.zipRight(
      table(page.tasks, taskColumns, "no tasks"),
      page.next === undefined ? Effect.void : line(`more: --cursor ${page.next}`)
    )))
}).pipe(Command.withDescription("List the tasks the platform's journal holds, newest first"))

/**
 * The columns of a task's model turns: when, the tokens in and out, the prompt cache's reads, how it finished and
 * the calls it asked for; its duration when the API gives one (`durationMillis`).
 */
const turnColumns = (turns: ReadonlyArray<any>): ReadonlyArray<readonly [string, (t: any) => unknown]> => [
  ["STEP", (t) => String(t.step)],
  ["AT", (t) => t.at],
  ...turns.some((t) => typeof t.durationMillis === "number") ? [["MS", (t: any) => t.durationMillis] as const] : [],
  ["IN", (t) => t.usage?.inputTokens],
  ["OUT", (t) => t.usage?.outputTokens],
  ["CACHE READ", (t) => t.usage?.cacheReadTokens],
  ["FINISH", (t) => t.finishReason],
  ["CALLS", (t) => Array.isArray(t.toolCalls) ? t.toolCalls.map((c: any) => `${c.name} (${c.id})`).join(", ") : undefined]
]

/** A task's tokens: in and out, and the prompt cache's reads when there were any. */
const tokens = (usage: { inputTokens: number; outputTokens: number; cacheReadTokens?: number }): string =>
  `${usage.inputTokens} in, ${usage.outputTokens} out` + (usage.cacheReadTokens ? `, ${usage.cacheReadTokens} cache reads` : "")

/** A task's timeline, as lines: the task, then its turns, calls and approvals. */
const showTask = (task: any): Effect.Effect<void> =>
  Effect.gen(function*() {
    yield* fields([
      ["task", task.taskId],
      ["agent", task.agentId],
      ["status", task.status],
      ["outcome", task.outcome],
      ["created", task.createdAt],
      ["ended", task.endedAt],
      ["prompt", task.prompt],
      ["tools", Array.isArray(task.tools) ? task.tools.join(", ") : undefined],
      ["tokens", task.usage === undefined ? undefined : tokens(task.usage)],
      ["trace", task.traceId]
    ])
    if (Array.isArray(task.turns) && task.turns.length > 0) {
      yield* line("\nturns:")
      yield* table(task.turns, turnColumns(task.turns), "")
    }
    if (Array.isArray(task.calls) && task.calls.length > 0) {
      yield* line("\ncalls:")
      yield* table(task.calls, [
        ["CALL", (c: any) => c.toolCallId],
        ["TOOL", (c: any) => c.name],
        ["OUTCOME", (c: any) => c.outcome],
        ["MS", (c: any) => c.durationMillis],
        ["ANSWER", (c: any) => c.value ?? c.error]
      ], "")
    }
    if (Array.isArray(task.approvals) && task.approvals.length > 0) {
      yield* line("\napprovals:")
      yield* table(task.approvals, [
        ["CALL", (a: any) => a.toolCallId],
        ["TOOL", (a: any) => a.toolName],
        ["DECISION", (a: any) => a.decision],
        ["BY", (a: any) => a.decidedBy],
        ["REASON", (a: any) => a.reason]
      ], "")
    }
    if (task.final !== undefined) yield* line(`\nfinal: ${JSON.stringify(task.final)}`)
  })

const taskId = Args.text({ name: "task" }).pipe(Args.withDescription("the task's id"))

/** `tasks show ID`: the task's timeline. */
const show = Command.make("show", { ...accessOptions, json: jsonOption, task: taskId }, (options) =>
  runCommand(operateLayer(options, (to) => request(to, "GET", `/tasks/${encodeURIComponent(options.task)}`), showTask))).pipe(
    Command.withDescription("Show a task as a timeline: its turns, calls and approvals")
  )

/** `tasks cancel ID`: stops the task (an admin's token). */
const cancel = Command.make("cancel", {
  ...accessOptions,
  json: jsonOption,
  task: taskId,
  reason: Options.text("reason").pipe(Options.withDescription("why, said in the task's end"), Options.optional)
}, (options) =>
  runCommand(operateLayer(
    options,
    (to) =>
      request(to, "POST", `/tasks/${encodeURIComponent(options.task)}/cancel`, Option.match(options.reason, {
        onNone: () => ({}),
        onSome: (reason) => ({ reason })
      })),
    (task: TaskRow) => line(`cancelled: task ${task.taskId} (${task.status}${task.outcome === undefined ? "" : `, ${task.outcome}`})`)
  ))).pipe(Command.withDescription("Cancel a task (an admin's token): it ends as failed, the reason naming you"))

/** `tasks`: its subcommands. */
export const tasks = Command.make("tasks").pipe(
  Command.withDescription("The platform's tasks, through its operator API (PLATFORM_OPERATOR_TOKEN)"),
  Command.withSubcommands([list, show, cancel])
)

/** `approvals list`: the calls waiting for a person, the first to expire first. */
const approvalsList = Command.make("list", { ...accessOptions, json: jsonOption }, (options) =>
  runCommand(operateLayer(options, (to) => request(to, "GET", "/approvals"), (answer: { approvals: ReadonlyArray<any> }) =>
    table(answer.approvals, [
      ["TASK", (a) => a.taskId],
      ["CALL", (a) => a.toolCallId],
      ["AGENT", (a) => a.agentId],
      ["TOOL", (a) => a.toolName],
      ["EXPIRES", (a) => a.expiresAt],
      ["INPUT", (a) => a.input]
    ], "no approvals waiting")))).pipe(Command.withDescription("List the calls waiting for a person's decision"))

/** `approvals approve|deny TASK CALL`: the decision, journaled with the token's name. */
const decide = (decision: "approve" | "deny") =>
  Command.make(decision, {
    ...accessOptions,
    json: jsonOption,
    task: taskId,
    call: Args.text({ name: "call" }).pipe(Args.withDescription("the call's id (as `approvals list` names it)")),
    reason: Options.text("reason").pipe(
      Options.withDescription(decision === "deny" ? "why, for the model to read" : "why, journaled with the decision"),
      Options.optional
    )
  }, (options) =>
    runCommand(operateLayer(
      options,
      (to) =>
        request(to, "POST", `/approvals/${encodeURIComponent(options.task)}/${encodeURIComponent(options.call)}`, {
          decision,
          ...Option.match(options.reason, { onNone: () => ({}), onSome: (reason) => ({ reason }) })
        }),
      (answer: any) => line(`${answer.decision}: call ${answer.toolCallId} of task ${answer.taskId} (by ${answer.decidedBy})`)
    ))).pipe(Command.withDescription(
      decision === "approve" ? "Approve a call a task waits for (an approver's token)" : "Deny a call a task waits for (an approver's token)"
    ))

export const approve = decide("approve")
export const deny = decide("deny")

/** `approvals`: its subcommands. */
export const approvals = Command.make("approvals").pipe(
  Command.withDescription("The calls waiting for a person, through the operator API (PLATFORM_OPERATOR_TOKEN)"),
  Command.withSubcommands([approvalsList, approve, deny])
)

/** `agents`: each agent, its processes and what it holds against its limits. */
export const agents = Command.make("agents", { ...accessOptions, json: jsonOption }, (options) =>
  runCommand(operateLayer(options, (to) => request(to, "GET", "/agents"), (answer: { agents: ReadonlyArray<any> }) =>
    table(answer.agents, [
      ["AGENT", (a) => a.agentId],
      ["PROCESSES", (a) => `${a.processes.filter((p: any) => p.live).length}/${a.processes.length} live`],
      ["CONNECTIONS", (a) => String(a.connections)],
      ["TASKS", (a) => `${a.tasks.held}/${a.tasks.max}`],
      ["TOOLS", (a) => a.tools.join(", ")]
    ], "no agents")))).pipe(Command.withDescription("List the platform's agents, their processes and what they hold"))

/** The subcommands, for the help and the usage of a bad command line. */
export const operateTree = {
  tasks: { list, show, cancel },
  approvals: { list: approvalsList, approve, deny }
}

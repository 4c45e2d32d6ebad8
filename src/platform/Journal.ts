/**
 * The platform's journal (design: The platform): what a restarted platform needs to take its tasks back.
 * Each task (who holds it, its prompt, the tools it was given), each model turn, each delivered
 * call and each answer go to a SQL database (a SQLite file, or any `SqlClient`'s) as they happen.
 * On start, every task that had not ended runs again: the model's journaled turns are replayed
 * instead of asked again, a journaled answer is reused, and a call still unanswered is delivered
 * again with its id and deadline. The loop is deterministic given the same turns and results, so
 * the replay reaches the point the task was at.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { Clock, Context, Duration, Effect, Layer, Option, Schema, type Scope } from "effect"
import * as Sql from "../internal/journalSql.js"
import * as SqlStore from "../internal/sqlStore.js"
import { TimedOut, ToolResult, ToolResultFromJson } from "../ToolResult.js"
import * as LanguageModel from "../LanguageModel.js"
import * as Toolkit from "../Toolkit.js"
import { TaskEvent } from "../protocol/Protocol.js"
import type * as TaskRunner from "./TaskRunner.js"

/** The journal's database could not be opened, prepared or read. */
export class JournalUnavailable extends Schema.TaggedError<JournalUnavailable>("agent-tools/JournalUnavailable")(
  "JournalUnavailable",
  {
    /** The journal's file, or its client's database as well as the client names it. */
    path: Schema.String,
    reason: Schema.String
  }
) {
  override get message(): string {
    return `the platform journal ${this.path} cannot be used: ${this.reason}`
  }
}

/** The tools a task was given at submission; `own` marks the task holder's. */
export const TaskTools = Schema.Array(Schema.Struct({ entry: Toolkit.ManifestEntry, own: Schema.Boolean }))
/** The tools a task was given at submission. */
export type TaskTools = typeof TaskTools.Type

/** A task as submitted. */
export interface TaskRecord {
  readonly taskId: string
  readonly agentId: string
  readonly processId: string
  readonly prompt: string
  readonly tools: TaskTools
}

/** A delivered call as journaled; `result` once it was answered. */
export interface JournaledCall {
  readonly name: string
  readonly arguments: string
  readonly deadlineAt: number
  readonly result: ToolResult | undefined
}

/** A task that had not ended: what its replay needs. */
export interface OpenTask extends TaskRecord {
  readonly turns: ReadonlyArray<LanguageModel.ModelTurn>
  readonly calls: ReadonlyMap<string, JournaledCall>
}

/** A task that ended recently: its final event, for a late re-attach. */
export interface EndedTask {
  readonly taskId: string
  readonly agentId: string
  readonly processId: string
  readonly final: TaskEvent
  readonly endedAt: number
}

/** The journal's writes and its one read. A write that fails is a defect: the task fails, saying why. */
export class Journal extends Context.Tag("agent-tools/platform/Journal")<Journal, {
  /** The journal's file, or its client's database as well as the client names it. */
  readonly path: string
  readonly started: (task: TaskRecord) => Effect.Effect<void>
  readonly turn: (taskId: string, step: number, turn: LanguageModel.ModelTurn) => Effect.Effect<void>
  readonly delivered: (taskId: string, call: TaskRunner.Delivery) => Effect.Effect<void>
  readonly answered: (taskId: string, toolCallId: string, result: ToolResult) => Effect.Effect<void>
  readonly ended: (taskId: string, final: TaskEvent, endedAt: number) => Effect.Effect<void>
  /** The tasks to take back: those still running, and those ended after `endedSince` (older ones are deleted). */
  readonly load: (endedSince: number) => Effect.Effect<
    { readonly open: ReadonlyArray<OpenTask>; readonly ended: ReadonlyArray<EndedTask> },
    JournalUnavailable
  >
  /** Deletes the tasks that ended at or before `before` (epoch ms). */
  readonly purge: (before: number) => Effect.Effect<void>
  /** Rows per table, for tests. */
  readonly counts: Effect.Effect<{ readonly tasks: number; readonly turns: number; readonly calls: number }>
}>() {}

const ToolsJson = Schema.parseJson(TaskTools)
const TurnJson = Schema.parseJson(LanguageModel.ModelTurn)
const ResultJson = Schema.parseJson(ToolResultFromJson)
const EventJson = Schema.parseJson(TaskEvent)

/**
 * The journal in the database of the `SqlClient` in context. Its tables are made at start (migrations
 * in a table of their own); failing that, or reading it, is `JournalUnavailable` naming the database.
 */
export const layerSqlClient: Layer.Layer<Journal, JournalUnavailable, SqlClient.SqlClient> = Layer.scoped(
  Journal,
  Effect.gen(function*() {
    // Rows are read by their column names: a client's name transforms (to camelCase, say) must not apply.
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    const path = SqlStore.databaseName(sql)
    const unavailable = (reason: string) => new JournalUnavailable({ path, reason })
    yield* SqlStore.migrate({ migrations: Sql.migrations, table: Sql.migrationsTable, unavailable })

    const load = (endedSince: number) =>
      Effect.gen(function*() {
        yield* Sql.purgeEnded(sql, endedSince)
        const rows = yield* Sql.tasks(sql)
        const turns = new Map<string, Array<LanguageModel.ModelTurn>>()
        for (const row of yield* Sql.turns(sql)) {
          const list = turns.get(row.task_id) ?? []
          // Steps are 1, 2, ...: a gap would replay the wrong turn, so the replay stops before it.
          if (Number(row.step) === list.length + 1) list.push(yield* Schema.decode(TurnJson)(row.turn))
          turns.set(row.task_id, list)
        }
        const calls = new Map<string, Map<string, JournaledCall>>()
        for (const row of yield* Sql.calls(sql)) {
          const byId = calls.get(row.task_id) ?? new Map<string, JournaledCall>()
          byId.set(row.tool_call_id, {
            name: row.name,
            arguments: row.arguments,
            deadlineAt: Number(row.deadline_at),
            result: row.result === null ? undefined : yield* Schema.decode(ResultJson)(row.result)
          })
          calls.set(row.task_id, byId)
        }
        const open: Array<OpenTask> = []
        const ended: Array<EndedTask> = []
        for (const row of rows) {
          const base = { taskId: row.task_id, agentId: row.agent_id, processId: row.process_id }
          if (row.status === "running") {
            open.push({
              ...base,
              prompt: row.prompt,
              tools: yield* Schema.decode(ToolsJson)(row.tools),
              turns: turns.get(row.task_id) ?? [],
              calls: calls.get(row.task_id) ?? new Map()
            })
          } else if (row.final !== null) {
            const final = yield* Schema.decode(EventJson)(row.final)
            ended.push({ ...base, final, endedAt: Number(row.ended_at ?? 0) })
          }
        }
        return { open, ended }
      }).pipe(SqlStore.orUnavailable(unavailable))

    return Journal.of({
      path,
      started: (task) =>
        Effect.orDie(Sql.insertTask(sql, { ...task, tools: Schema.encodeSync(ToolsJson)(task.tools) })),
      turn: (taskId, step, turn) => Effect.orDie(Sql.insertTurn(sql, taskId, step, Schema.encodeSync(TurnJson)(turn))),
      delivered: (taskId, call) => Effect.orDie(Sql.insertCall(sql, taskId, call)),
      answered: (taskId, toolCallId, result) =>
        Effect.orDie(Sql.answerCall(sql, taskId, toolCallId, Schema.encodeSync(ResultJson)(result))),
      ended: (taskId, final, endedAt) =>
        Effect.orDie(Sql.endTask(sql, taskId, Schema.encodeSync(EventJson)(final), endedAt)),
      load,
      purge: (before) => Effect.ignoreLogged(Sql.purgeEnded(sql, before)),
      counts: Effect.orDie(Sql.counts(sql))
    })
  })
)

/**
 * The journal in the SQLite file `filename` (created if missing; WAL mode): `layerSqlClient` on a
 * client of its own. A file that cannot be opened fails with `JournalUnavailable` naming it.
 */
export const layerSql = (options: { readonly filename: string }): Layer.Layer<Journal, JournalUnavailable> =>
  Layer.provide(
    // Fresh: two journals on two files in one graph must not share the first one's build.
    Layer.fresh(layerSqlClient),
    SqlStore.layerSqlite(options.filename, (reason) => new JournalUnavailable({ path: options.filename, reason }))
  )

/**
 * The platform's journal: the `Journal` provided (`layerSqlClient` on a client of one's choosing),
 * else `layerSql` on `filename` when one is given, else none (tasks in memory only).
 */
export const serviceOrFile = (
  filename: string | undefined
): Effect.Effect<Journal["Type"] | undefined, JournalUnavailable, Scope.Scope> =>
  Effect.gen(function*() {
    const provided = yield* Effect.serviceOption(Journal)
    if (Option.isSome(provided)) return provided.value
    if (filename === undefined) return undefined
    return Context.get(yield* Layer.build(layerSql({ filename })), Journal)
  })

// ---------------------------------------------------------------------------------------------
// One task's run, journaled.

/**
 * The model of one task: the journaled turns first, in order, without asking; each later turn
 * asks `model` and is journaled before the loop sees it (so its calls are never delivered unjournaled).
 */
export const replayingModel = (
  journal: Journal["Type"],
  taskId: string,
  journaled: ReadonlyArray<LanguageModel.ModelTurn>,
  model: LanguageModel.LanguageModel["Type"]
): LanguageModel.LanguageModel["Type"] => {
  // Successful turns so far: a failed request (retried by the loop) is not a step.
  let step = 0
  return LanguageModel.LanguageModel.of({
    generate: (request) =>
      Effect.suspend(() => {
        const replayed = journaled[step]
        if (replayed !== undefined) {
          step++
          return Effect.succeed(replayed)
        }
        return Effect.tap(model.generate(request), (turn) => journal.turn(taskId, ++step, turn))
      })
  })
}

/**
 * The delivery of one task's calls: a new call is journaled before it goes out, and its answer
 * before the loop sees it. A journaled call is not asked twice: its answer is reused; without one,
 * it goes out again with its journaled deadline, and past that deadline it reads as timed out, as
 * the first run's would have.
 */
export const journaledDeliver = (
  journal: Journal["Type"],
  taskId: string,
  journaled: ReadonlyMap<string, JournaledCall>,
  tools: TaskTools,
  deliver: TaskRunner.TaskOptions["deliver"]
): TaskRunner.TaskOptions["deliver"] =>
(call) =>
  Effect.gen(function*() {
    const known = journaled.get(call.toolCallId)
    if (known === undefined) {
      yield* journal.delivered(taskId, call)
      return yield* Effect.tap(deliver(call), (result) => journal.answered(taskId, call.toolCallId, result))
    }
    if (known.result !== undefined) return known.result
    const timeoutMillis = tools.find((t) => t.entry.name === call.name)?.entry.timeoutMillis ?? 0
    // The first run's own deadline was its start + the tool's timeout: the same text.
    const timedOut = ToolResult.failure(new TimedOut({ toolName: call.name, allowedMillis: timeoutMillis }))
    const now = yield* Clock.currentTimeMillis
    if (known.deadlineAt <= now) return timedOut
    const result = yield* deliver({ ...call, deadlineAt: known.deadlineAt }).pipe(
      Effect.timeoutTo({
        duration: Duration.millis(known.deadlineAt - now),
        onSuccess: (result): ToolResult | undefined => result,
        onTimeout: () => undefined
      })
    )
    if (result === undefined) return timedOut
    yield* journal.answered(taskId, call.toolCallId, result)
    return result
  })

/**
 * The run journal (design: Durable runs): what a run needs to go on after its process died. An agent
 * run given a `Journal` (`Agent.run`, `Agent.resume`) and every platform task write, as they happen,
 * each model turn (before its calls go out), each call as it starts and its outcome (before the loop
 * sees it), and the approvals a run waits for; a run resumed in any process with the same store
 * replays its journaled turns instead of asking the model again, and reuses its journaled outcomes.
 * One mechanism and one set of SQL for both: an agent run and a platform task are rows of the same
 * tables (`kind`). Stores: `layerMemory`, `layerSql` (a SQLite file), `layerSqlClient` (any
 * `SqlClient`: PostgreSQL through `@effect/sql-pg` is the same layer with another client, a run's
 * writes, and its reads of one run and of an agent's open tasks, pipelined on one connection of the
 * journal's own beside the client's pool).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import type * as Statement from "@effect/sql/Statement"
import { Clock, Context, Effect, Layer, Option, Schema, type Scope } from "effect"
import * as Sql from "./internal/sql/journal.js"
import * as Reads from "./internal/sql/operatorReads.js"
import * as Sessions from "./internal/sql/sessions.js"
import * as Pipelined from "./internal/sql/pipelined.js"
import * as SqlStore from "./internal/sql/store.js"
import { ToolResult, ToolResultFromJson } from "./ToolResult.js"
import * as LanguageModel from "./LanguageModel.js"
import * as Toolkit from "./Toolkit.js"

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
    return `the run journal ${this.path} cannot be used: ${this.reason}`
  }
}

/** The tools a task was given at submission; `own` marks the task holder's. */
export const TaskTools = Schema.Array(Schema.Struct({ entry: Toolkit.ManifestEntry, own: Schema.Boolean }))
/** The tools a task was given at submission. */
export type TaskTools = typeof TaskTools.Type

/** A run as started: a platform task (`kind: "task"`, with its holder and tools) or an agent run (`"run"`). */
export interface RunRecord {
  readonly runId: string
  readonly kind: "task" | "run"
  /** The platform agent whose task it is, or the agent's name for an agent run. */
  readonly agentId: string
  /** The process holding a task; empty for an agent run. */
  readonly processId: string
  readonly prompt: string
  /** The tools a task was given; none for an agent run (its tools are its agent's). */
  readonly tools: TaskTools
  /** The span the task was submitted under (W3C `traceparent`), when a tracer listened: its run continues that trace. */
  readonly traceparent?: string | undefined
}

/** A call as journaled when it started; `result` once it ended. */
export interface JournaledCall {
  readonly name: string
  readonly arguments: string
  readonly deadlineAt: number
  readonly result: ToolResult | undefined
  /** When it was journaled as started; undefined for an outcome no handler was asked for (reused, denied, unknown). */
  readonly startedAt?: number | undefined
  readonly endedAt?: number | undefined
  /** The outcome's kind: `Succeeded`, or the failure's `_tag` (`TimedOut`, `OutcomeUnknown`, `Denied`, ...). */
  readonly outcome?: string | undefined
}

/**
 * An approval a run asked for, bound to one call: its id, its canonical input and a fingerprint of
 * the tool's definition (name, description, schemas). `pending` until a person decides; no decision
 * counts at or after `expiresAt`.
 */
export interface Approval {
  readonly toolCallId: string
  readonly toolName: string
  /** The decoded input's JSON, for the person deciding. */
  readonly input: string
  readonly inputKey: string
  readonly fingerprint: string
  readonly expiresAt: number
  readonly decision: "pending" | "approved" | "denied"
  readonly reason: string | undefined
  readonly askedAt?: number | undefined
  /** Who decided: `agent <id>` (its token, `DecideApproval`) or an operator's name (the operator API). */
  readonly decidedBy?: string | undefined
  readonly decidedAt?: number | undefined
}

/** A run that had not ended: what resuming it needs. */
export interface OpenRun extends RunRecord {
  readonly status: "running" | "suspended"
  readonly turns: ReadonlyArray<LanguageModel.ModelTurn>
  readonly calls: ReadonlyMap<string, JournaledCall>
  readonly approvals: ReadonlyMap<string, Approval>
}

/** A run that ended: a task's final event's JSON, or an agent run's `RunResult`'s. */
export interface EndedRun {
  readonly runId: string
  readonly kind: "task" | "run"
  readonly agentId: string
  readonly processId: string
  readonly final: string | undefined
  readonly result: string | undefined
  readonly endedAt: number
}

/** A platform task as a listing gives it (newest first): no prompt, tools, turns or calls. */
export interface TaskSummary {
  readonly taskId: string
  readonly agentId: string
  readonly processId: string
  /** `suspended`: waiting for a person to decide the approvals it asked for. */
  readonly status: "running" | "suspended" | "ended"
  /** When it was journaled first (epoch ms; 0 for a task journaled before this was). */
  readonly createdAt: number
  readonly endedAt: number | undefined
  /** Its final event's JSON, once it ended. */
  readonly final: string | undefined
  readonly traceparent: string | undefined
}

/** Which tasks `Journal.listTasks` gives. */
export type TaskQuery = Reads.TaskQuery

/** An approval waiting for a person, of a platform task or of a task its `exec_agent` calls started. */
export interface PendingDecision {
  readonly taskId: string
  readonly agentId: string
  readonly toolCallId: string
  readonly toolName: string
  readonly input: string
  readonly askedAt: number | undefined
  readonly expiresAt: number
}

/**
 * A platform task as the journal holds it, for a person reading it: while it runs, its turns (with their
 * usage), calls and approvals; once it ended, its final event only (the rest is deleted at its end).
 */
export interface TaskRecord extends TaskSummary {
  readonly prompt: string
  /** The names of the tools it was given. */
  readonly tools: ReadonlyArray<string>
  /** Up to the first gap, as a resume reads them; `at` when journaled. */
  readonly turns: ReadonlyArray<{ readonly step: number; readonly at: number | undefined; readonly turn: LanguageModel.ModelTurn }>
  readonly calls: ReadonlyArray<JournaledCall & { readonly toolCallId: string }>
  readonly approvals: ReadonlyArray<Approval>
  /** The tasks its `exec_agent` calls started, and theirs. */
  readonly children: ReadonlyArray<{ readonly taskId: string; readonly agentId: string; readonly status: string }>
}

/** The journal's writes and reads. A write that fails is a defect: the run fails, saying why. */
export class Journal extends Context.Tag("agent-tools/Journal")<Journal, {
  /** The journal's file, or its client's database as well as the client names it. */
  readonly path: string
  /** Writes a new run; one already there (a task its host wrote first) is kept as it is. */
  readonly started: (run: RunRecord) => Effect.Effect<void>
  /**
   * Writes a model turn; gives the turn the journal holds for the step, which is the run's: the first
   * writer's (a killed process's late write, or another process's, may have come first).
   */
  readonly turn: (
    runId: string,
    step: number,
    turn: LanguageModel.ModelTurn
  ) => Effect.Effect<LanguageModel.ModelTurn>
  /** A call about to run (the first start of an id counts). */
  readonly callStarted: (
    runId: string,
    call: {
      readonly toolCallId: string
      readonly name: string
      readonly arguments: string
      readonly deadlineAt: number
    }
  ) => Effect.Effect<void>
  /** Writes a call's outcome; gives the one the journal holds, which is the call's: the first writer's. */
  readonly callEnded: (runId: string, toolCallId: string, result: ToolResult) => Effect.Effect<ToolResult>
  /**
   * A call and its outcome at once, for an outcome no handler ran for here (reused, unknown,
   * denied): never journaled as started without one. Gives the outcome the journal holds.
   */
  readonly callAnswered: (
    runId: string,
    call: {
      readonly toolCallId: string
      readonly name: string
      readonly arguments: string
      readonly deadlineAt: number
    },
    result: ToolResult
  ) => Effect.Effect<ToolResult>
  /** Asks for approvals and marks the run suspended until they are given. */
  readonly suspended: (runId: string, approvals: ReadonlyArray<Omit<Approval, "decision" | "reason">>) => Effect.Effect<void>
  /** Marks a suspended run as running again. */
  readonly resumed: (runId: string) => Effect.Effect<void>
  /** Gives a decision on a pending approval; false if none was pending there at `now` (none, expired or decided). */
  readonly decide: (
    runId: string,
    toolCallId: string,
    decision: {
      readonly approved: boolean
      readonly reason: string | undefined
      readonly now: number
      /** Who decides, journaled with the decision: `agent <id>` or an operator's name. */
      readonly by?: string | undefined
    }
  ) => Effect.Effect<boolean, JournalUnavailable>
  /** Ends a run: a task's final event (JSON) or a run's result (JSON). */
  readonly ended: (
    runId: string,
    end: { readonly final?: string | undefined; readonly result?: string | undefined },
    endedAt: number
  ) => Effect.Effect<void>
  /** One run, open or ended; undefined if the journal does not have it. */
  readonly run: (runId: string) => Effect.Effect<OpenRun | EndedRun | undefined, JournalUnavailable>
  /** The platform's tasks to take back: those not ended, and those ended after `endedSince` (older ones are deleted). */
  readonly tasks: (endedSince: number) => Effect.Effect<
    { readonly open: ReadonlyArray<RunRecord>; readonly ended: ReadonlyArray<EndedRun> },
    JournalUnavailable
  >
  /**
   * The platform's tasks not ended, the oldest first: what a cluster runner's sweep looks through for those of its
   * shards it does not run. Reads those rows alone, however many ended tasks the journal keeps.
   */
  readonly openTasks: Effect.Effect<ReadonlyArray<RunRecord>, JournalUnavailable>
  /**
   * Deletes the runs of `kind` (default `"task"`, the platform's) that ended at or before `before`
   * (epoch ms). An ended run keeps one row, its result, for a resume to answer; the platform purges
   * its tasks past `keepEndedTasks`, and agent runs (`"run"`) stay until their owner purges them.
   */
  readonly purge: (before: number, kind?: "task" | "run") => Effect.Effect<void>
  /** Rows per table, for tests. */
  readonly counts: Effect.Effect<{ readonly tasks: number; readonly turns: number; readonly calls: number }>
  /**
   * The platform tasks of `agentId` not ended yet, and the UTF-8 bytes of their prompts: what a cluster's
   * per-agent limits count, whichever runner holds each task (design: Hostile clients).
   */
  readonly openUsage: (agentId: string) => Effect.Effect<{ readonly tasks: number; readonly promptBytes: number }>
  /** The platform's tasks `query` wants, newest first (made-at, then id), at most `query.limit`. */
  readonly listTasks: (query: TaskQuery) => Effect.Effect<ReadonlyArray<TaskSummary>, JournalUnavailable>
  /** One platform task for a person reading it; undefined if the journal does not hold it. */
  readonly task: (taskId: string) => Effect.Effect<TaskRecord | undefined, JournalUnavailable>
  /** The approvals of the platform's tasks not decided nor expired at `now`, the first to expire first. */
  readonly pendingApprovals: (now: number, limit: number) => Effect.Effect<ReadonlyArray<PendingDecision>, JournalUnavailable>
  /** The sessions of agent runs (`Session.ts`): who holds each, and their turns. */
  readonly sessions: Sessions.Store
}>() {}

/** Whether `run` is one that had not ended. */
export const isOpen = (run: OpenRun | EndedRun): run is OpenRun => "status" in run

const ToolsJson = Schema.parseJson(TaskTools)
const TurnJson = Schema.parseJson(LanguageModel.ModelTurn)
const ResultJson = Schema.parseJson(ToolResultFromJson)

type Client = SqlClient.SqlClient

/** A run's row as `RunRecord`, its tools decoded. */
const recordOf = (row: Sql.TaskRow) =>
  Effect.map(
    Schema.decode(ToolsJson)(row.tools),
    (tools): RunRecord => ({
      runId: row.task_id,
      kind: row.kind,
      agentId: row.agent_id,
      processId: row.process_id,
      prompt: row.prompt,
      tools,
      traceparent: row.traceparent ?? undefined
    })
  )

/** An ended run's row as `EndedRun`. */
const endedOf = (row: Sql.TaskRow): EndedRun => ({
  runId: row.task_id,
  kind: row.kind,
  agentId: row.agent_id,
  processId: row.process_id,
  final: row.final ?? undefined,
  result: row.result ?? undefined,
  endedAt: Number(row.ended_at ?? 0)
})

/** A run's journaled turns (up to the first gap), calls and approvals, decoded. */
const decodeParts = Effect.fnUntraced(function*(whole: Sql.WholeRun) {
  const turns: Array<{ step: number; at: number | undefined; turn: LanguageModel.ModelTurn }> = []
  for (const turn of whole.turns) {
    // Steps are 1, 2, ...: a gap would replay the wrong turn, so the replay stops before it.
    if (Number(turn.step) !== turns.length + 1) break
    turns.push({ step: turns.length + 1, at: numberOr(turn.at), turn: yield* Schema.decode(TurnJson)(turn.turn) })
  }
  const calls = new Map<string, JournaledCall & { readonly toolCallId: string }>()
  for (const call of whole.calls) {
    calls.set(call.tool_call_id, {
      toolCallId: call.tool_call_id,
      name: call.name,
      arguments: call.arguments,
      deadlineAt: Number(call.deadline_at),
      result: call.result === null ? undefined : yield* Schema.decode(ResultJson)(call.result),
      startedAt: numberOr(call.started_at),
      endedAt: numberOr(call.ended_at),
      outcome: call.outcome ?? undefined
    })
  }
  const approvals = new Map<string, Approval>()
  for (const approval of whole.approvals) {
    approvals.set(approval.tool_call_id, {
      toolCallId: approval.tool_call_id,
      toolName: approval.tool_name,
      input: approval.input,
      inputKey: approval.input_key,
      fingerprint: approval.fingerprint,
      expiresAt: Number(approval.expires_at),
      decision: approval.decision,
      reason: approval.reason ?? undefined,
      askedAt: numberOr(approval.asked_at),
      decidedBy: approval.decided_by ?? undefined,
      decidedAt: numberOr(approval.decided_at)
    })
  }
  return { turns, calls, approvals }
})

/** A number the database gave (a BIGINT may come as text), or undefined for none. */
const numberOr = (value: number | string | null | undefined): number | undefined =>
  value === null || value === undefined ? undefined : Number(value)

/** The run `runId` as the journal holds it: ended, or open with its turns (up to the first gap), calls and approvals. */
const readRun = Effect.fnUntraced(function*(sql: Client, runId: string, exec?: Sql.Exec) {
  const whole = yield* Sql.wholeRun(sql, runId, false, exec)
  if (whole === undefined) return undefined
  const { row } = whole
  if (row.status === "ended") return endedOf(row)
  const { approvals, calls, turns } = yield* decodeParts(whole)
  const open: OpenRun = { ...(yield* recordOf(row)), status: row.status, turns: turns.map((t) => t.turn), calls, approvals }
  return open
})

/** A listed row as `TaskSummary`. */
const summaryOf = (row: Reads.ListedRow): TaskSummary => ({
  taskId: row.task_id,
  agentId: row.agent_id,
  processId: row.process_id,
  status: row.status,
  createdAt: Number(row.created_at),
  endedAt: numberOr(row.ended_at),
  final: row.final ?? undefined,
  traceparent: row.traceparent ?? undefined
})

/** The platform task `taskId` for a person reading it: its row, its parts while it runs, its children. */
const readTask = (sql: Client, taskId: string) =>
  Effect.gen(function*() {
    const whole = yield* Sql.wholeRun(sql, taskId, true)
    if (whole === undefined || whole.row.kind !== "task") return undefined
    const { approvals, calls, turns } = yield* decodeParts(whole)
    const tools = whole.row.tools === "" ? [] : yield* Schema.decode(ToolsJson)(whole.row.tools)
    const record: TaskRecord = {
      ...summaryOf(whole.row),
      prompt: whole.row.prompt,
      tools: tools.map((tool) => tool.entry.name),
      turns,
      calls: [...calls.values()],
      approvals: [...approvals.values()],
      children: (yield* Reads.childrenOf(sql, taskId)).map((c) => ({ taskId: c.task_id, agentId: c.agent_id, status: c.status }))
    }
    return record
  })

/** The pending approvals' rows as `PendingDecision`s. */
const readPending = (sql: Client, now: number, limit: number) =>
  Effect.map(Reads.pendingApprovals(sql, now, limit), (rows) =>
    rows.map((row): PendingDecision => ({
      taskId: row.task_id,
      agentId: row.agent_id,
      toolCallId: row.tool_call_id,
      toolName: row.tool_name,
      input: row.input,
      askedAt: numberOr(row.asked_at),
      expiresAt: Number(row.expires_at)
    })))

/** Writes `result` with `write`, its kind and time beside it; gives the outcome the journal holds (the first writer's). */
const held = <E>(
  result: ToolResult,
  write: (answer: Sql.Answer) => Effect.Effect<ReadonlyArray<{ readonly result: string | null }>, E>
): Effect.Effect<ToolResult> => {
  const text = Schema.encodeSync(ResultJson)(result)
  const outcome = result.failure?._tag ?? "Succeeded"
  return SqlStore.whileBusy(Effect.flatMap(Clock.currentTimeMillis, (at) => write({ result: text, outcome, at }))).pipe(
    Effect.flatMap((rows) => {
      const stored = rows[0]?.result
      return stored === undefined || stored === null || stored === text
        ? Effect.succeed(result)
        : Schema.decode(ResultJson)(stored)
    }),
    Effect.orDie
  )
}

/** The platform's tasks: the open ones and those ended since `endedSince` (older ended ones purged first). */
const readTasks = (sql: Client, endedSince: number) =>
  Effect.gen(function*() {
    yield* Sql.purgeEnded(sql, endedSince, "task")
    const open: Array<RunRecord> = []
    const done: Array<EndedRun> = []
    for (const row of yield* Sql.tasks(sql)) {
      if (row.status === "ended") done.push(endedOf(row))
      else open.push(yield* recordOf(row))
    }
    return { open, ended: done }
  })

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
    const tasks = (endedSince: number) => readTasks(sql, endedSince).pipe(SqlStore.orUnavailable(unavailable))
    const openTasks = Effect.flatMap(Sql.openTasks(sql), Effect.forEach(recordOf)).pipe(SqlStore.orUnavailable(unavailable))
    // On PostgreSQL, a task's writes (a call at a time) go out pipelined and prepared, on a connection of their own,
    // and so do a cluster runner's reads of each task (a run taken up, the agent's open tasks counted).
    const pipelined = yield* Pipelined.make(sql)
    const run = (runId: string) => readRun(sql, runId, pipelined?.run).pipe(SqlStore.orUnavailable(unavailable))
    const write = makeWrites(sql, unavailable, pipelined)
    const reads = {
      listTasks: (query: TaskQuery) =>
        Effect.map(Reads.listTasks(sql, query), (rows) => rows.map(summaryOf)).pipe(SqlStore.orUnavailable(unavailable)),
      task: (taskId: string) => readTask(sql, taskId).pipe(SqlStore.orUnavailable(unavailable)),
      pendingApprovals: (now: number, limit: number) => readPending(sql, now, limit).pipe(SqlStore.orUnavailable(unavailable))
    }
    return Journal.of({ path, ...write, ...reads, run, tasks, openTasks, sessions: Sessions.make(sql) })
  })
)

/** A journal write: tried again while another process holds the file (SQLite), else a defect. */
const orDie = <A, E>(effect: Effect.Effect<A, E>): Effect.Effect<A> => Effect.orDie(SqlStore.whileBusy(effect))

/** The journal's writes on `sql`: a run's start, turns, calls, approvals and end. */
const makeWrites = (
  sql: Client,
  unavailable: (reason: string) => JournalUnavailable,
  pipelined: Pipelined.Pipelined | undefined
): Omit<Journal["Type"], "path" | "run" | "tasks" | "openTasks" | "listTasks" | "task" | "pendingApprovals" | "sessions"> => {
  /** A statement of a task's writes: on the pipeline when there is one. */
  const exec = <A extends object>(statement: Statement.Statement<A>): Effect.Effect<ReadonlyArray<A>, SqlError> =>
    pipelined === undefined ? statement : pipelined.run(statement)
  return {
    started: (run) =>
      orDie(Effect.flatMap(Clock.currentTimeMillis, (createdAt) =>
        exec(Sql.insertTask(sql, {
          taskId: run.runId,
          kind: run.kind,
          agentId: run.agentId,
          processId: run.processId,
          prompt: run.prompt,
          tools: Schema.encodeSync(ToolsJson)(run.tools),
          traceparent: run.traceparent ?? null,
          createdAt
        })))),
    turn: (runId, step, turn) => {
      const text = Schema.encodeSync(TurnJson)(turn)
      return Effect.flatMap(Clock.currentTimeMillis, (at) => exec(Sql.insertTurn(sql, runId, step, text, at))).pipe(
        Effect.flatMap((rows) => {
          const held = rows[0]?.turn
          return held === undefined || held === text ? Effect.succeed(turn) : Schema.decode(TurnJson)(held)
        }),
        orDie
      )
    },
    callStarted: (runId, call) => orDie(Effect.flatMap(Clock.currentTimeMillis, (at) => exec(Sql.insertCall(sql, runId, call, at)))),
    callEnded: (runId, toolCallId, result) => held(result, (answer) => exec(Sql.answerCall(sql, runId, toolCallId, answer))),
    callAnswered: (runId, call, result) => held(result, (answer) => exec(Sql.insertAnswered(sql, runId, call, answer))),
    suspended: (runId, approvals) =>
      orDie(Effect.flatMap(Clock.currentTimeMillis, (askedAt) => sql.withTransaction(Effect.zipRight(
        Effect.forEach(approvals, (a) =>
          Sql.askApproval(sql, {
            task_id: runId,
            tool_call_id: a.toolCallId,
            tool_name: a.toolName,
            input: a.input,
            input_key: a.inputKey,
            fingerprint: a.fingerprint,
            expires_at: a.expiresAt,
            asked_at: askedAt
          }), { discard: true }),
        Sql.suspendTask(sql, runId)
      )))),
    resumed: (runId) => orDie(Sql.resumeTask(sql, runId)),
    decide: (runId, toolCallId, decision) =>
      Sql.decideApproval(sql, { taskId: runId, toolCallId }, {
        ...decision,
        reason: decision.reason ?? null,
        by: decision.by ?? null
      }).pipe(
        Effect.map((changed) => changed > 0),
        SqlStore.orUnavailable(unavailable)
      ),
    ended: (runId, end, endedAt) => {
      const ending = { final: end.final ?? null, result: end.result ?? null }
      return orDie(pipelined === undefined ? Sql.endTask(sql, runId, ending, endedAt) : exec(Sql.endTaskPg(sql, runId, ending, endedAt)))
    },
    purge: (before, kind = "task") => Effect.ignoreLogged(SqlStore.whileBusy(Sql.purgeEnded(sql, before, kind))),
    counts: orDie(Sql.counts(sql)),
    openUsage: (agentId) => orDie(Sql.openUsage(sql, agentId, pipelined?.run))
  }
}

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
 * The journal in memory, for tests and for runs that need resume and approvals within one process:
 * `layerSql` on an in-memory SQLite database (the same statements, so the same behaviour).
 */
export const layerMemory: Layer.Layer<Journal> = Layer.orDie(layerSql({ filename: ":memory:" }))

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

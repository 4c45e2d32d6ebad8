/**
 * Agents that call agents in cluster mode (design: Agents that call agents, Cluster mode): two runners
 * in this process on one real PostgreSQL (test/support/postgres.ts), agent-a's serving process
 * connected to the first, agent-b's to the second. agent-a's task's `exec_agent` starts a cluster task
 * of agent-b, given to agent-b's process through the runner it watches on, whatever runner holds
 * agent-b's shard or the child's; the parent, on its own runner, gets the child's answer. Also: the
 * refusals (an agent not allowed, none of its processes watching, its limits over the cluster), the
 * child stopped past the call's deadline, and the parent's runner stopped mid-call, as a deploy
 * stops it and by SIGKILL (a runner process of its own, test/support/clusterExecAgentChild.ts).
 */
import { assert, layer } from "@effect/vitest"
import * as Sharding from "@effect/cluster/Sharding"
import * as ShardId from "@effect/cluster/ShardId"
import { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { Context, Deferred, type Duration, Effect, Exit, Fiber, Layer, Logger, LogLevel, Redacted, Schedule, Scope, Stream } from "effect"
import { LanguageModel, Timing, Tool, Toolkit } from "../../src/index.js"
import { PlatformServer } from "../../src/exports/platform.js"
import { type Protocol } from "../../src/exports/protocol.js"
import { PlatformClient, Serve } from "../../src/exports/serve.js"
import * as Journal from "../../src/Journal.js"
import * as Cluster from "../../src/platform/Cluster.js"
import * as ClusterAgentCalls from "../../src/platform/ClusterAgentCalls.js"
import { type Child, startChild } from "../support/childProcess.js"
import { childPrompt, described, lookupTool, noteTool, replacedMidCall, router } from "../support/execAgent.js"
import { clientLayer } from "../support/platform.js"
import * as Pg from "../support/postgres.js"

const tokens = new Map([["tok-a", "agent-a"], ["tok-b", "agent-b"], ["tok-c", "agent-c"]])

const policy = Timing.layer({
  redelivery: Schedule.spaced("1 second"),
  reconnect: Schedule.spaced("100 millis").pipe(Schedule.intersect(Schedule.recurs(300)))
})

/** A new database on the server, for one test (runners of an earlier test must not linger in its tables). */
let databases = 0
const freshDatabase = Effect.gen(function*() {
  const server = yield* Pg.Postgres
  const sql = yield* SqlClient.SqlClient
  const name = `exec_agent_${++databases}`
  yield* sql.unsafe(`CREATE DATABASE ${name}`)
  const url = server.url.replace(/\/[^/]+$/, `/${name}`)
  yield* Effect.provide(Cluster.migrate, PgClient.layer({ url: Redacted.make(url) }))
  return url
}).pipe(Effect.orDie)

/** The runners' options: agent-a allowed to call agent-b, and what a test adds. */
interface RunnerOptions {
  readonly agentCallTimeout?: Duration.DurationInput
  readonly maxTasksPerAgent?: number
}

/**
 * A runner on the database at `url`, in `scope` (a test may close it before its end, as a deploy
 * stops a runner), its model `router`: its context, with its `Sharding`.
 */
const runnerOn = (url: string, options: RunnerOptions, scope: Scope.Scope) =>
  Effect.flatMap(Effect.promise(() => Pg.freePort()), (port) =>
    Layer.buildWithScope(PlatformServer.layerWebSocket({ port: 0 }).pipe(
      Layer.provideMerge(Cluster.layerHandlers({ tokens, agentCalls: { "agent-a": ["agent-b"] }, ...options })),
      Layer.provideMerge(Cluster.layerSharding({ port, shardsPerGroup: 30 })),
      Layer.provide(Journal.layerSqlClient),
      Layer.provide(LanguageModel.layerScripted([router], { repeat: true })),
      Layer.provide(PgClient.layer({ url: Redacted.make(url) })),
      Layer.provide(policy),
      Layer.provide(Logger.minimumLogLevel(LogLevel.Warning))
    ), scope))

/** How many of the 30 shards the runner holds. */
const shardsOf = (runner: Context.Context<Sharding.Sharding>) =>
  Array.from({ length: 30 }, (_, i) => ShardId.make("default", i + 1))
    .filter((shard) => Context.get(runner, Sharding.Sharding).hasShardId(shard)).length

/** Waits until `shared` holds of the runners' shard counts (a shard moved mid-test moves its tasks and watchers). */
const sharedOut = (runners: ReadonlyArray<Context.Context<Sharding.Sharding>>, shared: (counts: Array<number>) => boolean) =>
  Effect.sync(() => runners.map(shardsOf)).pipe(
    Effect.repeat({ until: shared, schedule: Schedule.spaced("100 millis") }),
    Effect.timeout("30 seconds"),
    Effect.orDie
  )

/** Two runners on the database at `url`, each in a scope of its own, once they share the shards out. */
const twoRunners = (url: string, options: RunnerOptions = {}) =>
  Effect.gen(function*() {
    const scopes = yield* Effect.all([0, 1].map(() =>
      Effect.acquireRelease(Scope.make(), (scope) => Scope.close(scope, Exit.void))
    ))
    const runners = yield* Effect.all(scopes.map((scope) => runnerOn(url, options, scope)), { concurrency: "unbounded" })
    yield* sharedOut(runners, (counts) => counts.every((n) => n >= 13))
    const urls = yield* Effect.forEach(runners, (runner) => Effect.provide(PlatformServer.url, runner))
    const states = runners.map((runner) => Context.get(runner, PlatformServer.PlatformState))
    return { urls, states, scopes }
  })

/** A serving process of `agentId` serving `tool`, connected to the runner at `url`, for the test's scope. */
const servingProcess = <T extends Tool.Any>(url: string, agentId: string, token: string, tool: T) =>
  Effect.gen(function*() {
    const client = yield* Layer.build(clientLayer({ url, agentId, token }, policy))
    const served = yield* Serve.makeConfig(yield* Toolkit.make(tool), { shutdownGrace: "100 millis" }).pipe(Effect.provide(client))
    return Object.assign(served, { client: Context.get(client, PlatformClient.PlatformClient) })
  })

/** Waits until the runner that holds `agentId`'s shard sees a process of it watching for tasks to run. */
const watching = (states: ReadonlyArray<PlatformServer.PlatformState["Type"]>, agentId: string) =>
  Effect.forEach(states, (state) => state.watchingProcesses(agentId)).pipe(
    Effect.repeat({ until: (seen) => seen.some((processes) => processes.length > 0), schedule: Schedule.spaced("50 millis") }),
    Effect.timeout("15 seconds"),
    Effect.orDie
  )

/** The tasks of `agentId` the cluster's journal holds (ended or not). */
const journaledTasks = (url: string, agentId: string) =>
  Effect.scoped(Effect.gen(function*() {
    const sql = Context.get(yield* Layer.build(Pg.pgClient(url, { maxConnections: 1 })), PgClient.PgClient)
    const rows = yield* sql<{ readonly task_id: string }>`SELECT task_id FROM journal_tasks WHERE agent_id = ${agentId}`
    return rows.map((row) => row.task_id)
  })).pipe(Effect.orDie)

layer(Pg.layer(), { timeout: "120 seconds", excludeTestServices: true })("exec_agent in cluster mode", (it) => {
  it.scoped("agent-a's task on runner 1 runs agent-b's task, whose tool agent-b's process on runner 2 runs once; the parent gets the answer", () =>
    Effect.gen(function*() {
      const url = yield* freshDatabase
      const { states, urls } = yield* twoRunners(url)
      const bRuns: Array<string> = []
      const aRuns: Array<string> = []
      yield* servingProcess(urls[1]!, "agent-b", "tok-b", lookupTool(bRuns))
      yield* watching(states, "agent-b")
      const a = yield* servingProcess(urls[0]!, "agent-a", "tok-a", noteTool(aRuns))
      const events = [...yield* Stream.runCollect(a.submitTask("Ask agent-b about order A-1."))]
      const last = events[events.length - 1]
      assert.strictEqual(last?._tag, "TaskCompleted", JSON.stringify(last))
      const output = last?._tag === "TaskCompleted" ? last.output : ""
      assert.include(output, `"agent":"agent-b","connected":true,"tools":["lookup"]`)
      assert.include(output, `a2="agent-b read: b1=\\"order A-1: shipped\\""`)
      assert.deepStrictEqual(bRuns, ["lookup A-1"])
      assert.deepStrictEqual(aRuns, [])
      assert.deepStrictEqual(events.map(described).filter((d) => d !== undefined), [
        "sub-task agent-b of a2",
        "sub-task of a2 completed",
        "done"
      ])
      // The child is a cluster task of agent-b, journaled under the id the call gives it.
      assert.deepStrictEqual(yield* journaledTasks(url, "agent-b"), [`${last?.taskId}/a2`])
    }), { timeout: 60_000 })

  it.scoped("approvals reach the root across runners: the child's call that needs approval suspends the parent; decided there, the tree completes", () =>
    Effect.gen(function*() {
      const url = yield* freshDatabase
      const { states, urls } = yield* twoRunners(url)
      const bRuns: Array<string> = []
      const b = yield* servingProcess(urls[1]!, "agent-b", "tok-b", lookupTool(bRuns, { needsApproval: true }))
      yield* watching(states, "agent-b")
      const a = yield* servingProcess(urls[0]!, "agent-a", "tok-a", noteTool([]))
      // One tree: suspended, checked, decided at the root; whether its child lived on the other runner.
      const tree = Effect.gen(function*() {
        const suspended = yield* Deferred.make<Extract<Protocol.TaskEvent, { _tag: "TaskSuspended" }>>()
        const run = yield* Effect.fork(Stream.runCollect(a.submitTask("Ask agent-b about order A-1.").pipe(
          Stream.tap((event) => event._tag === "TaskSuspended" ? Deferred.succeed(suspended, event) : Effect.void)
        )))
        const { pending, taskId } = yield* Deferred.await(suspended).pipe(Effect.timeout("20 seconds"))
        assert.deepStrictEqual(pending.map((p) => [p.toolCallId, p.input, p.path?.map((hop) => `${hop.runId}:${hop.toolName}`)]), [[
          "a2/b1",
          { orderId: "A-1" },
          [`${taskId}:exec_agent`, `${taskId}/a2:lookup`]
        ]])
        // The parent was submitted on runner 1, which holds it; the child is held by its shard's owner.
        const elsewhere = (yield* states[1]!.taskCount) > 0
        // agent-b cannot decide it on its own task: the refusal names the root.
        const refused = yield* Effect.flip(b.client.approve(`${taskId}/a2`, "b1"))
        assert.include(refused.message, `on task ${taskId} as call a2/b1`)
        const before = bRuns.length
        yield* a.client.approve(taskId, "a2/b1")
        const events = [...yield* Fiber.join(run).pipe(Effect.timeout("30 seconds"))]
        const last = events[events.length - 1]
        assert.strictEqual(last?._tag, "TaskCompleted", JSON.stringify(last))
        assert.include(last?._tag === "TaskCompleted" ? last.output : "", `a2="agent-b read: b1=\\"order A-1: shipped\\""`)
        assert.strictEqual(bRuns.length, before + 1, "the approved call ran once")
        return elsewhere
      })
      // Trees until one whose child lived on the other runner than its parent (its decision sent there): a
      // child's shard is its id's, so about one tree in two.
      const places = yield* tree.pipe(Effect.repeat({ until: (elsewhere) => elsewhere, times: 7 }))
      assert.isTrue(places, "no tree had its child on the other runner in 8 tries")
    }), { timeout: 60_000 })

  it.scoped("a serving process given the child that goes away is replaced by another of its agent's, on the other runner; the parent gets the answer", () =>
    Effect.gen(function*() {
      const url = yield* freshDatabase
      const { states, urls } = yield* twoRunners(url)
      const gate = yield* Deferred.make<void>()
      // One process of agent-b on each runner.
      const processes = yield* Effect.forEach(urls, (runnerUrl) =>
        Effect.gen(function*() {
          const scope = yield* Scope.make()
          const runs: Array<string> = []
          yield* Scope.extend(servingProcess(runnerUrl, "agent-b", "tok-b", lookupTool(runs, { gate })), scope)
          return { scope, runs }
        }))
      yield* Effect.forEach(states, (state) => state.watchingProcesses("agent-b")).pipe(
        Effect.repeat({ until: (seen) => new Set(seen.flat()).size === 2, schedule: Schedule.spaced("50 millis") }),
        Effect.timeout("15 seconds")
      )
      const a = yield* servingProcess(urls[0]!, "agent-a", "tok-a", noteTool([]))
      const run = yield* Effect.fork(a.runTask("Ask agent-b about order A-1."))
      // The process given the child runs its call, and stops mid-call (deregistered: it is gone).
      const { output, runs } = yield* replacedMidCall([processes[0]!, processes[1]!], gate, run)
      assert.include(output, `a2="agent-b read: b1=\\"order A-1: shipped\\""`)
      assert.deepStrictEqual(runs, [["lookup A-1"], ["lookup A-1"]])
    }), { timeout: 60_000 })

  it.scoped("an exec_agent of an agent the rules do not allow is refused and starts no task; list_agents sees agent-b's process on the other runner", () =>
    Effect.gen(function*() {
      const url = yield* freshDatabase
      const { states, urls } = yield* twoRunners(url)
      const cRuns: Array<string> = []
      yield* servingProcess(urls[1]!, "agent-b", "tok-b", lookupTool([]))
      yield* servingProcess(urls[1]!, "agent-c", "tok-c", lookupTool(cRuns))
      yield* watching(states, "agent-b")
      yield* watching(states, "agent-c")
      const a = yield* servingProcess(urls[0]!, "agent-a", "tok-a", noteTool([]))
      const output = yield* a.runTask("Ask agent-c about order A-1.")
      assert.include(output, `a1=[{"agent":"agent-b","connected":true,"tools":["lookup"]}]`)
      assert.include(
        output,
        "a2!AgentCallFailed: exec_agent agent-c: agent agent-a may not run tasks of agent agent-c: the platform's agentCalls lets it " +
          "run only agent-b; no task was started"
      )
      assert.deepStrictEqual(cRuns, [])
      assert.deepStrictEqual(yield* journaledTasks(url, "agent-c"), [])
      assert.deepStrictEqual(yield* journaledTasks(url, "agent-b"), [])
    }), { timeout: 60_000 })

  it.scoped("past the exec_agent call's deadline the child task is stopped by its owner, whichever runner that is", () =>
    Effect.gen(function*() {
      const url = yield* freshDatabase
      const { states, urls } = yield* twoRunners(url, { agentCallTimeout: "2 seconds" })
      const bRuns: Array<string> = []
      const b = yield* servingProcess(urls[1]!, "agent-b", "tok-b", lookupTool(bRuns, { takes: "20 seconds" }))
      yield* watching(states, "agent-b")
      const a = yield* servingProcess(urls[0]!, "agent-a", "tok-a", noteTool([]))
      const events = [...yield* Stream.runCollect(a.submitTask("Ask agent-b about order A-1."))]
      const last = events[events.length - 1]
      const output = last?._tag === "TaskCompleted" ? last.output : ""
      assert.include(output, "a2!exec_agent timed out after", output)
      assert.notInclude(output, "shipped")
      assert.deepStrictEqual(bRuns, ["lookup A-1"])
      // The child's end, as agent-b's process sees it through its runner: stopped, saying by what.
      const ended = yield* Effect.flip(b.runAttached(`${last?.taskId}/a2`)).pipe(Effect.timeout("15 seconds"))
      assert.strictEqual(ended._tag, "TaskFailedError")
      assert.include(ended.message, `the exec_agent call that started it (task ${last?.taskId}, call a2) ended first`)
      assert.deepStrictEqual(events.map(described).filter((d) => d !== undefined), ["sub-task agent-b of a2", "sub-task of a2 timed_out", "done"])
    }), { timeout: 60_000 })

  it.scoped("the runner of the parent stops mid-call: the parent goes on at the other runner with the same child; agent-b's tool runs once", () =>
    Effect.gen(function*() {
      const url = yield* freshDatabase
      const { scopes, states, urls } = yield* twoRunners(url)
      const bRuns: Array<string> = []
      const gate = yield* Deferred.make<void>()
      yield* servingProcess(urls[1]!, "agent-b", "tok-b", lookupTool(bRuns, { gate }))
      yield* watching(states, "agent-b")
      // agent-a's process goes on to the second runner once the first is gone.
      const a = yield* servingProcess(urls.join(","), "agent-a", "tok-a", noteTool([]))
      const run = yield* Effect.fork(a.runTask("Ask agent-b about order A-1."))
      yield* Effect.sync(() => bRuns.length).pipe(
        Effect.repeat({ until: (n) => n > 0, schedule: Schedule.spaced("20 millis") }),
        Effect.timeout("20 seconds")
      )
      // The parent's runner (its process submitted through it) stops, handing its shards over.
      yield* Scope.close(scopes[0]!, Exit.void)
      // The child still open while the parent is taken up at the other runner (about 1.5 s here): its
      // call, run again, finds the child running and gives it again to agent-b's process, which runs nothing twice.
      yield* Effect.sleep("4 seconds")
      yield* Deferred.succeed(gate, undefined)
      const output = yield* Fiber.join(run).pipe(Effect.timeout("45 seconds"))
      assert.include(output, `a2="agent-b read: b1=\\"order A-1: shipped\\""`)
      assert.deepStrictEqual(bRuns, ["lookup A-1"])
      // One child, the same one: the call run again on the other runner found it rather than start another.
      assert.strictEqual((yield* journaledTasks(url, "agent-b")).length, 1)
    }), { timeout: 90_000 })

  it.scoped("exec_agent with no process of agent-b watching, or agent-b at its limits over the cluster, fails with the reason and starts no task", () =>
    Effect.gen(function*() {
      const url = yield* freshDatabase
      const { states, urls } = yield* twoRunners(url, { maxTasksPerAgent: 1 })
      const a = yield* servingProcess(urls[0]!, "agent-a", "tok-a", noteTool([]))
      const alone = yield* a.runTask("Ask agent-b about order A-1.")
      assert.include(alone, `a1=[{"agent":"agent-b","connected":false,"tools":[]}]`)
      assert.include(
        alone,
        "a2!AgentCallFailed: exec_agent agent-b: agent agent-b has no serving process connected (none watches for tasks to run); " +
          "no task was started"
      )
      // agent-b's process on the other runner, its own task open (waiting for its tool): agent-b is at its one task.
      const bRuns: Array<string> = []
      const gate = yield* Deferred.make<void>()
      const b = yield* servingProcess(urls[1]!, "agent-b", "tok-b", lookupTool(bRuns, { gate }))
      yield* watching(states, "agent-b")
      const own = yield* Effect.fork(b.runTask(childPrompt))
      yield* Effect.sync(() => bRuns.length).pipe(
        Effect.repeat({ until: (n) => n > 0, schedule: Schedule.spaced("20 millis") }),
        Effect.timeout("20 seconds")
      )
      const limited = yield* a.runTask("Ask agent-b about order A-1.")
      assert.include(limited, "a2!AgentCallFailed: exec_agent agent-b: ")
      assert.include(limited, "the platform's maxTasksPerAgent is 1")
      assert.include(limited, "; no task was started")
      yield* Deferred.succeed(gate, undefined)
      assert.include(yield* Fiber.join(own), "shipped")
      assert.deepStrictEqual(bRuns, ["lookup A-1"])
      // agent-b's own task alone: neither call started one.
      assert.strictEqual((yield* journaledTasks(url, "agent-b")).length, 1)
    }), { timeout: 60_000 })

  it.scoped("SIGKILL of the parent's runner mid-call: the parent goes on at the other runner with the same child; agent-b's tool runs once", () =>
    Effect.gen(function*() {
      const url = yield* freshDatabase
      // The runner that dies is a process of its own; the one that lives, in this process.
      const killedPort = yield* Effect.promise(() => Pg.freePort())
      const doomed: Child = startChild("test/support/clusterExecAgentChild.ts", {
        DATABASE_URL: url,
        RUNNER_PORT: String(killedPort)
      })
      yield* Effect.addFinalizer(() => Effect.sync(() => doomed.process.kill("SIGKILL")))
      const line = yield* Effect.promise(() => doomed.waitFor("listening:", 60_000))
      assert.isDefined(line, `the runner did not start: ${doomed.lines.join("\n")}`)
      const survivor = yield* runnerOn(url, {}, yield* Effect.scope)
      // Both hold shards: the parent, submitted through the doomed runner, is placed there.
      yield* sharedOut([survivor], ([n]) => n! >= 13 && n! <= 17)
      const survivorUrl = yield* Effect.provide(PlatformServer.url, survivor)
      const bRuns: Array<string> = []
      const gate = yield* Deferred.make<void>()
      yield* servingProcess(survivorUrl, "agent-b", "tok-b", lookupTool(bRuns, { gate }))
      // agent-b's shard may be either runner's: its owner is asked, as exec_agent asks it, until it sees the process watch.
      yield* Effect.provide(ClusterAgentCalls.AssignmentsEntity.client, survivor).pipe(
        Effect.flatMap((assignments) => assignments("agent-b").Pick()),
        Effect.repeat({ until: ({ processId }) => processId !== null, schedule: Schedule.spaced("50 millis") }),
        Effect.timeout("15 seconds"),
        Effect.orDie
      )
      const a = yield* servingProcess(`${line!.slice("listening:".length)},${survivorUrl}`, "agent-a", "tok-a", noteTool([]))
      const run = yield* Effect.fork(a.runTask("Ask agent-b about order A-1."))
      yield* Effect.sync(() => bRuns.length).pipe(
        Effect.repeat({ until: (n) => n > 0, schedule: Schedule.spaced("20 millis") }),
        Effect.timeout("20 seconds")
      )
      doomed.process.kill("SIGKILL")
      // Its shards move once their locks expire (about 5 s): the parent's call runs again there meanwhile or after.
      yield* Effect.sleep("8 seconds")
      yield* Deferred.succeed(gate, undefined)
      const output = yield* Fiber.join(run).pipe(Effect.timeout("60 seconds"))
      assert.include(output, `a2="agent-b read: b1=\\"order A-1: shipped\\""`)
      assert.deepStrictEqual(bRuns, ["lookup A-1"])
      assert.strictEqual((yield* journaledTasks(url, "agent-b")).length, 1)
    }), { timeout: 120_000 })

  it.scoped("cancel across runners: a call given to a worker on the other runner is interrupted there; a parent cancelled cancels its child", () =>
    Effect.gen(function*() {
      const url = yield* freshDatabase
      const { states, urls } = yield* twoRunners(url)
      const bRuns: Array<string> = []
      const interrupted: Array<{ readonly orderId: string; readonly at: number }> = []
      const b = yield* servingProcess(urls[1]!, "agent-b", "tok-b", lookupTool(bRuns, { takes: "30 seconds", interrupted }))
      yield* watching(states, "agent-b")
      /** Submits `prompt` through `process`; once the tool has begun its `runs`-th run, cancels the task: its events. */
      const cancelledMidCall = (process: typeof b, prompt: string, runs: number, reason: string) =>
        Effect.gen(function*() {
          const seen: Array<Protocol.TaskEvent> = []
          const events = yield* Effect.fork(Stream.runForEach(process.submitTask(prompt), (e) => Effect.sync(() => seen.push(e))))
          yield* Effect.sync(() => bRuns.length).pipe(
            Effect.repeat({ until: (n) => n === runs, schedule: Schedule.spaced("20 millis") }),
            Effect.timeout("20 seconds")
          )
          const taskId = seen.find((e) => e._tag === "TaskStarted")?.taskId ?? ""
          const before = Date.now()
          assert.deepStrictEqual(yield* process.client.cancel(taskId, reason), { cancelled: true })
          yield* Effect.sync(() => interrupted.length).pipe(
            Effect.repeat({ until: (n) => n === runs, schedule: Schedule.spaced("10 millis") }),
            Effect.timeout("5 seconds")
          )
          // The handler on the other runner's worker was interrupted (its finalizer ran) within a second.
          assert.isBelow(interrupted[runs - 1]!.at - before, 1000)
          yield* Fiber.join(events).pipe(Effect.ignore, Effect.timeout("10 seconds"))
          return { taskId, last: seen[seen.length - 1] }
        })
      // A process of agent-b on the first runner that serves `note` only: its task's `lookup` goes to the worker.
      const submitter = yield* servingProcess(urls[0]!, "agent-b", "tok-b", noteTool([]))
      const own = yield* cancelledMidCall(submitter, childPrompt, 1, "not needed")
      assert.deepInclude(own.last, { _tag: "TaskCancelled", by: "agent agent-b", reason: "not needed" })
      // agent-a's task on the first runner, its child of agent-b's running the tool on the second: cancelled at the root.
      const a = yield* servingProcess(urls[0]!, "agent-a", "tok-a", noteTool([]))
      const parent = yield* cancelledMidCall(a, "Ask agent-b about order A-1.", 2, "")
      assert.deepInclude(parent.last, { _tag: "TaskCancelled", by: "agent agent-a" })
      const child = yield* Effect.flip(b.runAttached(`${parent.taskId}/a2`)).pipe(Effect.timeout("15 seconds"))
      assert.include(child.message, `cancelled by agent agent-a: its parent task ${parent.taskId} was cancelled`)
      assert.deepStrictEqual(bRuns, ["lookup A-1", "lookup A-1"])
    }), { timeout: 90_000 })
})

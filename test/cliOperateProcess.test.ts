/**
 * The operating commands as processes (`tsx src/main.ts ...`), against an embedded platform in this process: the
 * exit codes (0 done, 1 a task that failed or a refusal of the API, its reason on stderr, 2 a bad command line)
 * and what stdout carries (`--detach`'s id, `--json`'s lines). The commands' behaviour in full:
 * test/cliOperate.test.ts.
 */
import { assert, describe, it } from "@effect/vitest"
import { execFile, spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import { ConfigProvider, Context, Effect, Exit, Layer, Logger, LogLevel, Redacted, Scope } from "effect"
import { Journal, LanguageModel } from "../src/index.js"
import { PlatformServer } from "../src/exports/platform.js"

const root = fileURLToPath(new URL("..", import.meta.url))
const admin = "admin-token-0123456789"

/** Runs `tsx src/main.ts ...args` to its end with `env` besides: its exit code, stdout and stderr. */
const main = (args: ReadonlyArray<string>, env: Record<string, string>) =>
  Effect.promise(() =>
    new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      execFile(process.execPath, ["--import", "tsx", "src/main.ts", ...args], {
        cwd: root,
        env: { ...process.env, ANTHROPIC_API_KEY: "", OPENAI_API_KEY: "", OPENAI_BASE_URL: "", ...env },
        timeout: 60_000
      }, (error, stdout, stderr) => resolve({ code: error === null ? 0 : (error as { code?: number }).code ?? 1, stdout, stderr }))
    })
  )

/**
 * Runs `tsx src/main.ts ...args` with `env` besides, its stdout closed by its reader before it prints (as `| head`
 * closes it once it has its lines): its exit code and stderr.
 */
const mainUnread = (args: ReadonlyArray<string>, env: Record<string, string>) =>
  Effect.promise(() =>
    new Promise<{ code: number | null; stderr: string }>((resolve) => {
      const child = spawn(process.execPath, ["--import", "tsx", "src/main.ts", ...args], {
        cwd: root,
        env: { ...process.env, ANTHROPIC_API_KEY: "", OPENAI_API_KEY: "", OPENAI_BASE_URL: "", ...env },
        stdio: ["ignore", "pipe", "pipe"],
        timeout: 60_000
      })
      child.stdout.destroy()
      let stderr = ""
      child.stderr.on("data", (chunk) => (stderr += chunk))
      child.on("close", (code) => resolve({ code, stderr }))
    })
  )

/** An embedded platform, journaled in memory, its model `script`, an admin's operator token; its WebSocket URL. */
const startPlatform = (script: ReadonlyArray<LanguageModel.ScriptedTurn>) =>
  Effect.gen(function*() {
    const scope = yield* Scope.make()
    yield* Effect.addFinalizer(() => Scope.close(scope, Exit.void))
    const listening = yield* Layer.buildWithScope(
      PlatformServer.layerWebSocket({ port: 0 }).pipe(
        Layer.provide(PlatformServer.layerHandlers({
          tokens: new Map([["tok-1", "agent-1"]]),
          operatorTokens: [{ token: Redacted.make(admin), role: "admin", name: "root" }]
        })),
        Layer.provide(Journal.layerMemory),
        Layer.provide(LanguageModel.layerScripted(script, { repeat: true })),
        Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map())))
      ),
      scope
    )
    return `ws://127.0.0.1:${Context.get(listening, PlatformServer.Listening).port}/rpc`
  })

describe("the operating commands as processes: exit codes and output", () => {
  it.scopedLive("a stdout closed by its reader ends a command quietly, exit 0; tasks or approvals alone is a bad command line", () =>
    Effect.gen(function*() {
      const url = yield* startPlatform([{ text: "done" }])
      const env = { PLATFORM_URL: url, PLATFORM_TOKEN: "tok-1", PLATFORM_OPERATOR_TOKEN: admin }
      const [listed, agents, followed, bareTasks, bareApprovals] = yield* Effect.all([
        mainUnread(["tasks", "list"], env),
        mainUnread(["agents", "--json"], env),
        mainUnread(["submit", "--agent", "agent-1", "--json", "hello"], env),
        main(["tasks"], env),
        main(["approvals"], env)
      ], { concurrency: 2 })
      for (const unread of [listed, agents, followed]) {
        assert.strictEqual(unread.code, 0, unread.stderr)
        assert.strictEqual(unread.stderr, "")
      }
      assert.strictEqual(bareTasks.code, 2)
      assert.match(bareTasks.stderr, /^agent-tools: tasks needs a command: list, show, cancel\n\nusage: agent-tools tasks list /)
      assert.strictEqual(bareTasks.stdout, "")
      assert.strictEqual(bareApprovals.code, 2)
      assert.match(bareApprovals.stderr, /^agent-tools: approvals needs a command: list, approve, deny\n\nusage: agent-tools approvals list /)
    }).pipe(Logger.withMinimumLogLevel(LogLevel.Error)), 120_000)

  it.scopedLive("0 for a task completed or detached, 1 for a failed one or a refusal, 2 for a bad command line", () =>
    Effect.gen(function*() {
      const answers = yield* startPlatform([{ text: "done" }])
      const fails = yield* startPlatform([
        () => Effect.fail(new LanguageModel.ModelRequestRejected({ message: "no model here", status: 400 }))
      ])
      const env = (url: string) => ({ PLATFORM_URL: url, PLATFORM_TOKEN: "tok-1", PLATFORM_OPERATOR_TOKEN: admin })
      const [detached, followed, failed, unknown, bad, badTools] = yield* Effect.all([
        main(["submit", "--agent", "agent-1", "--detach", "hello"], env(answers)),
        main(["submit", "--agent", "agent-1", "--json", "hello"], env(answers)),
        main(["submit", "--agent", "agent-1", "hello"], env(fails)),
        main(["tasks", "show", "task-nope"], env(answers)),
        main(["tasks", "list", "--limit", "many"], env(answers)),
        main(["serve", "--tools", "test/fixtures/cliToolsBad.ts"], { ...env(answers), AGENT_ID: "agent-1" })
      ], { concurrency: 2 })
      assert.strictEqual(detached.code, 0, detached.stderr)
      assert.match(detached.stdout, /^task-\S+\n$/)
      assert.strictEqual(followed.code, 0, followed.stderr)
      const events = followed.stdout.trim().split("\n").map((line) => JSON.parse(line) as { _tag: string; output?: string })
      assert.strictEqual(events[0]?._tag, "TaskStarted")
      assert.deepStrictEqual([events.at(-1)?._tag, events.at(-1)?.output], ["TaskCompleted", "done"])
      assert.strictEqual(failed.code, 1)
      assert.match(failed.stdout, /✗ task \S+ failed: /)
      assert.match(failed.stderr, /^agent-tools: TaskNotCompleted: task \S+: /)
      assert.strictEqual(unknown.code, 1)
      assert.include(unknown.stderr, "agent-tools: OperatorApiError: 404 OperatorNotFound: task task-nope")
      assert.strictEqual(bad.code, 2)
      assert.include(bad.stderr, "'many' is not an integer")
      assert.strictEqual(badTools.code, 1)
      assert.include(badTools.stderr, "--tools test/fixtures/cliToolsBad.ts: its tools cannot be served: \"same\": the name is used by more than one tool")
    }).pipe(Logger.withMinimumLogLevel(LogLevel.Error)), 120_000)
})

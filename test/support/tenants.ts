/**
 * What the per-agent limit tests share (design: Hostile clients): the embedded platform with two
 * agents and the platform's options, its state for reading what each agent holds, and an attack run
 * from a process of its own while another agent's round trips are timed from a third.
 */
import { assert } from "@effect/vitest"
import { Effect, Layer, Logger, LogLevel, type Scope } from "effect"
import { WebSocket } from "ws"
import { LanguageModel, Timing } from "../../src/index.js"
import { PlatformServer } from "../../src/exports/platform.js"
import { PlatformClient } from "../../src/exports/serve.js"
import type { Options } from "../../src/platform/Options.js"
import { startChild } from "./childProcess.js"
import { clientLayer } from "./platform.js"

/** `tok-1` for `agent-1` (the attacker), `tok-2` for `agent-2` (the bystander). */
export const tokens = new Map([["tok-1", "agent-1"], ["tok-2", "agent-2"]])

/** No redelivery while a test runs. */
export const policy = Timing.layer({})

/**
 * The embedded platform on a free loopback port for the scope, with `options` and `listen`, its
 * model `script` (one conversation per task, no request kept): its URL and its state.
 */
export const tenantPlatform = (
  script: ReadonlyArray<LanguageModel.ScriptedTurn>,
  options: Partial<Options> = {},
  listen: Partial<PlatformServer.ListenOptions> = {}
): Effect.Effect<{ readonly url: string; readonly state: PlatformServer.PlatformState["Type"] }, never, Scope.Scope> =>
  Effect.gen(function*() {
    const context = yield* Layer.build(
      PlatformServer.layerWebSocket({ port: 0, ...listen }).pipe(
        Layer.provideMerge(PlatformServer.layerHandlers({ tokens, ...options })),
        Layer.provide(LanguageModel.layerScripted(script, { perConversation: true, keepRequests: false })),
        Layer.provide(policy),
        // Warnings only: the figures are the platform's fairness, not the cost of the test runner's console (each
        // task's INFO lines, hundreds under these attacks, go through vitest's intercepted console).
        Layer.provide(Logger.minimumLogLevel(LogLevel.Warning))
      )
    )
    const url = yield* Effect.provide(PlatformServer.url, context)
    return { url, state: yield* Effect.provide(PlatformServer.PlatformState, context) }
  }).pipe(Effect.orDie)

/** The bystander's client (`agent-2`), for the scope. */
export const bystander = (url: string) => Layer.build(clientLayer({ url, agentId: "agent-2", token: "tok-2" }, policy))

/** A call outside the lifecycle budget, answered at once: the bystander's round trip. */
export const roundTrip = Effect.flatMap(PlatformClient.PlatformClient, (c) =>
  c.completeToolCall({ agentId: "agent-2", processId: "p", results: [] }))

/** The process's resident memory, in MB. */
export const rssMb = (): number => process.memoryUsage().rss / 1024 / 1024

/** The `q`-quantile of sorted `values` (0 if none). */
const quantile = (values: ReadonlyArray<number>, q: number): number =>
  values[Math.min(values.length - 1, Math.floor(values.length * q))] ?? 0

/** Round trips, in milliseconds, sorted; their p50 and p99. */
export interface Latency {
  readonly rounds: ReadonlyArray<number>
  readonly p50: number
  readonly p99: number
}

/** The round trips of the probe's `lines` (`rt:<ms>`), as a `Latency`. */
const latencyOf = (lines: ReadonlyArray<string>): Latency => {
  const rounds = lines.filter((line) => line.startsWith("rt:")).map((line) => Number(line.slice(3)))
  rounds.sort((a, b) => a - b)
  return { rounds, p50: quantile(rounds, 0.5), p99: quantile(rounds, 0.99) }
}

/**
 * An attack run by test/support/tenantAttackChild.ts, measured: what it printed (and on `outcomes:`),
 * how long it ran, another agent's round trips meanwhile, the platform's highest memory.
 */
export interface Attack extends Latency {
  /**
   * Another agent's round trips once the attack printed `held` (the platform has read all it sent and
   * holds it), or undefined if it printed no such line.
   */
  readonly held: Latency | undefined
  /** The platform's process's highest resident memory seen, in MB. */
  readonly peakMb: number
  readonly lines: ReadonlyArray<string>
  readonly outcomes: ReadonlyArray<string>
  readonly seconds: number
}

/** A child of tenantAttackChild.ts with `env`, killed with the scope; once its connections are open. */
const attacker = (url: string, env: Record<string, string>) =>
  Effect.gen(function*() {
    const child = yield* Effect.acquireRelease(
      Effect.sync(() => startChild("test/support/tenantAttackChild.ts", { URL: url, TOKEN: "tok-1", ...env })),
      (child) => Effect.sync(() => child.process.kill())
    )
    yield* Effect.promise(() => child.waitFor("open:", 30_000))
    return child
  })

/**
 * Runs the attack of `env` (as `agent-1`) while another agent (`agent-2`), from a process of its own
 * too, times its round trips: what the platform does to the others, not what the test's own client
 * costs. The platform's resident memory is sampled every 20 ms meanwhile.
 */
export const attackWith = (
  url: string,
  env: Record<string, string>,
  timeoutMillis = 60_000
): Effect.Effect<Attack, never, Scope.Scope> =>
  Effect.gen(function*() {
    const prober = yield* attacker(url, { MODE: "probe", TOKEN: "tok-2" })
    const child = yield* attacker(url, env)
    const from = prober.lines.length
    const started = Date.now()
    const done = child.waitFor("done", timeoutMillis)
    let finished = false
    void done.then(() => void (finished = true))
    let peakMb = rssMb()
    let heldFrom: number | undefined
    while (!finished) {
      peakMb = Math.max(peakMb, rssMb())
      if (heldFrom === undefined && child.lines.includes("held")) heldFrom = prober.lines.length
      yield* Effect.sleep("20 millis")
    }
    const seconds = (Date.now() - started) / 1000
    const to = prober.lines.length
    prober.process.kill()
    const outcomes = child.lines.find((line) => line.startsWith("outcomes:"))
    return {
      ...latencyOf(prober.lines.slice(from, to)),
      held: heldFrom === undefined ? undefined : latencyOf(prober.lines.slice(heldFrom, to)),
      peakMb,
      lines: [...child.lines],
      outcomes: outcomes === undefined ? [] : JSON.parse(outcomes.slice(9)) as Array<string>,
      seconds
    }
  })

/**
 * What taking in `frames` frames of `bytes` each costs this process, in milliseconds: what a WebSocket
 * server does with each (reads of 64 KiB from its socket, copied into one buffer of the frame's size),
 * in new memory. The baseline of an attack that makes the platform take in that much at once.
 */
export const takeInMillis = (frames: number, bytes: number): number => {
  const started = performance.now()
  const taken: Array<Buffer> = []
  for (let f = 0; f < frames; f++) {
    const frame = Buffer.allocUnsafe(bytes)
    for (let at = 0; at < bytes; at += 65_536) frame.set(Buffer.alloc(Math.min(65_536, bytes - at), 1), at)
    taken.push(frame)
  }
  return taken.length === frames ? performance.now() - started : 0
}

/** What `assertStaysFast` holds another agent's round trips to, for the figures. */
export const staysFast = "p50 < 20 ms and p99 < 200 ms, or 3x the baseline's when that is more"

/**
 * Another agent's round trips `during` an attack stay fast: p50 under 20 ms and p99 under 200 ms, or under three
 * times the same figures with no attack (`baseline`, measured in the same run: `MODE: "idle"`) when those are
 * more. A machine loaded by other work slows every round trip, attacked or not; the test is of what the attack adds.
 */
export const assertStaysFast = (during: Latency, baseline: Latency): void => {
  const said = `${latencies(during)}; baseline ${latencies(baseline)}`
  assert.isBelow(during.p50, Math.max(20, 3 * baseline.p50), said)
  assert.isBelow(during.p99, Math.max(200, 3 * baseline.p99), said)
}

/** `p50 / p99` of a measure, for the figures. */
export const latencies = (measured: Latency): string =>
  `${measured.p50.toFixed(2)} ms / ${measured.p99.toFixed(2)} ms (${measured.rounds.length} round trips)`

/** What an upgrade came to: the socket once open, or the HTTP status and body of its refusal. */
export type Opened = WebSocket | { readonly status: number; readonly body: string }

/** Opens a raw WebSocket with `token`: resolves once open, or with the refusal. */
export const openWith = (url: string, token: string) =>
  new Promise<Opened>((resolve) => {
    const socket = new WebSocket(url, { headers: { authorization: `Bearer ${token}` } })
    socket.on("open", () => resolve(socket))
    socket.on("unexpected-response", (request, response) => {
      let body = ""
      response.on("data", (chunk) => void (body += String(chunk)))
      response.on("end", () => {
        resolve({ status: response.statusCode ?? 0, body })
        request.destroy()
      })
    })
    socket.on("error", () => resolve({ status: 0, body: "" }))
  })

/** Polls `read` every 50 ms until `done` holds (or `timeoutMillis`): the last value read. */
export const pollUntil = <A>(read: Effect.Effect<A>, done: (value: A) => boolean, timeoutMillis: number) =>
  Effect.gen(function*() {
    const until = Date.now() + timeoutMillis
    let value = yield* read
    while (!done(value) && Date.now() < until) {
      yield* Effect.sleep("50 millis")
      value = yield* read
    }
    return value
  })

/**
 * A pool of worker threads (design: Worker threads), `WorkerPool.make`, so the event loop is never
 * blocked. Closures cannot cross threads: a module the workers load declares the functions
 * (`WorkerPool.serve({ digest })`), and a tool's handler asks the pool to run one by name
 * (`(input) => pool.run("digest", input)`), an Effect like any other body, through the same pipeline.
 * At the deadline or on interruption the job's worker is terminated (a synchronous function cannot
 * yield) and the pool starts another; a worker that crashes is the call's failure, and is replaced.
 */
import * as Worker from "@effect/platform/Worker"
import * as WorkerRunner from "@effect/platform/WorkerRunner"
import * as NodeWorker from "@effect/platform-node/NodeWorker"
import * as NodeWorkerRunner from "@effect/platform-node/NodeWorkerRunner"
import { Effect, Exit, Layer, Pool, Schema, type Scope } from "effect"
import { createRequire } from "node:module"
import { serialize } from "node:v8"
import { existsSync } from "node:fs"
import { fileURLToPath, pathToFileURL } from "node:url"
import * as WorkerThreads from "node:worker_threads"

/** On the wire: a job's function threw (or the module has none of that name); its name, message and stack. */
export class JobFailed extends Schema.TaggedError<JobFailed>("agent-tools/WorkerPool/JobFailed")("JobFailed", {
  name: Schema.String,
  message: Schema.String,
  stack: Schema.optional(Schema.String)
}) {}

/**
 * What a failed job is to the caller: `_tag` is the thrown error's name, so the model reads
 * `RangeError: ...` (design: Error text) and `permanent` matches it, as for a body run in the process.
 */
export class JobError extends Error {
  constructor(readonly _tag: string, message: string, stack?: string) {
    super(message)
    this.name = _tag
    // The worker's stack, where the error was thrown: what a log line of the failure shows.
    if (stack !== undefined) this.stack = stack
  }
}

/** The worker running a job exited (crashed, or killed by something else) before answering. */
export class WorkerCrashed extends Schema.TaggedError<WorkerCrashed>("agent-tools/WorkerPool/WorkerCrashed")(
  "WorkerCrashed",
  { message: Schema.String }
) {}

/** `make` was given a module that is not there: no worker could ever start. */
export class ModuleNotFound extends Schema.TaggedError<ModuleNotFound>("agent-tools/WorkerPool/ModuleNotFound")(
  "ModuleNotFound",
  { message: Schema.String }
) {}

/** One job: the name of a function of the worker module and its (structured-cloneable) input. */
export class RunJob extends Schema.TaggedRequest<RunJob>()("RunJob", {
  failure: JobFailed,
  success: Schema.Unknown,
  payload: { fn: Schema.String, input: Schema.Unknown, maxOutputBytes: Schema.Number }
}) {}

/**
 * The failure a worker answers a job with when it ran none: an exception escaped it between jobs (a body's
 * timer that threw after the body answered). The pool retires that worker and runs the job on another.
 */
const retired = "agent-tools/WorkerPool/Retired"

/** What a try of a job gives when the worker did not run it. */
const notRun: unique symbol = Symbol("agent-tools/WorkerPool/notRun")

/** The name of a job's failure when its output cannot cross threads or is over `maxOutputBytes`. */
export const invalidOutput = "InvalidOutput"

/** A pool of worker threads that run the functions of one module. */
export interface WorkerPool {
  /**
   * Runs `fn` of the worker module on `input` in a free worker; waits for one when all are busy.
   * `A` is taken on trust: the tool's output Schema checks the value (invalid output).
   */
  readonly run: <A = unknown>(fn: string, input: unknown) => Effect.Effect<A, JobError | WorkerCrashed>
  /** Workers started so far (the first `size`, plus one per replaced worker). */
  readonly spawned: () => number
  /** Worker threads alive now: none once the pool's scope has closed. */
  readonly threads: () => number
  /** Succeeds once every worker has started and loaded its module (each answers one job). */
  readonly ready: Effect.Effect<void, JobError | WorkerCrashed>
}

/** Options of `make`. */
export interface Options {
  /** The module the workers load: it calls `WorkerPool.serve` with its functions. */
  readonly module: URL
  /** How many workers, each running one job at a time. Default 2. */
  readonly size?: number | undefined
  /** Given to each worker as `workerData`. */
  readonly workerData?: unknown
  /** Threads that do not keep the process alive (a pool nobody closes). Default false. */
  readonly unref?: boolean | undefined
  /**
   * Each worker's heap and stack bounds (Node's `resourceLimits`): a body that leaks ends its worker, not the
   * process (the call reads `WorkerCrashed`; the worker is replaced). Default `defaultResourceLimits`.
   */
  readonly resourceLimits?: WorkerThreads.ResourceLimits | undefined
  /**
   * The largest output a job may give, in bytes as it crosses threads (measured in the worker, before it is
   * copied here): a larger one fails the job with `InvalidOutput`. Default 16 MiB.
   */
  readonly maxOutputBytes?: number | undefined
}

/** A worker's heap bound unless a pool says otherwise: 1 GiB of old generation, 64 MiB of young. */
export const defaultResourceLimits: WorkerThreads.ResourceLimits = { maxOldGenerationSizeMb: 1024, maxYoungGenerationSizeMb: 64 }

/** The largest output a job may give unless a pool says otherwise. */
export const defaultMaxOutputBytes = 16 * 1024 * 1024

/**
 * Starts the pool's workers in the scope; closing it stops them. A `.ts` module is loaded through
 * `tsx` (as the rest of this project runs).
 */
export const make = (options: Options): Effect.Effect<WorkerPool, ModuleNotFound, Scope.Scope> =>
  Effect.gen(function*() {
    // Effect's worker manager re-spawns a worker that fails to start, for ever: refuse a missing module here.
    if (options.module.protocol === "file:" && !existsSync(fileURLToPath(options.module))) {
      return yield* new ModuleNotFound({ message: `the worker module ${options.module.href} does not exist` })
    }
    const threads = new Map<number, WorkerThreads.Worker>()
    // Until each has exited: a thread being stopped is still alive.
    const alive = new Set<WorkerThreads.Worker>()
    let spawned = 0
    const spawnLayer = NodeWorker.layer((id) => {
      spawned++
      const resourceLimits = options.resourceLimits ?? defaultResourceLimits
      const thread = options.module.pathname.endsWith(".ts")
        ? new WorkerThreads.Worker(tsBootstrap(options.module), { eval: true, workerData: options.workerData, resourceLimits })
        : new WorkerThreads.Worker(options.module, { workerData: options.workerData, resourceLimits })
      if (options.unref === true) thread.unref()
      threads.set(id, thread)
      alive.add(thread)
      thread.once("exit", () => {
        threads.delete(id)
        alive.delete(thread)
      })
      return thread
    })
    // One manager for the pool: it numbers the workers, the key of `threads`.
    const manager = yield* Layer.build(spawnLayer)
    const pool = yield* Pool.make({
      acquire: Worker.makeSerialized<RunJob>({}).pipe(
        Effect.provide(manager),
        // Unref'd again once its listeners are on: a `message` listener refs the thread's port, which then kept
        // a process whose work was done alive for ever.
        Effect.tap((worker) => Effect.sync(() => options.unref === true && threads.get(worker.id)?.unref()))
      ),
      size: options.size ?? 2
    })
    const maxOutputBytes = options.maxOutputBytes ?? defaultMaxOutputBytes
    // A job a worker did not run (its thread gone, or retired) is run again once that worker is given back.
    const run = <A>(fn: string, input: unknown): Effect.Effect<A, JobError | WorkerCrashed> =>
      Effect.flatMap(runOnce<A>(fn, input), (out) => out === notRun ? run<A>(fn, input) : Effect.succeed(out as A))
    const runOnce = <A>(fn: string, input: unknown): Effect.Effect<A | typeof notRun, JobError | WorkerCrashed> =>
      Effect.scoped(Effect.gen(function*() {
        const worker = yield* Effect.mapError(
          pool.get,
          (error) => new WorkerCrashed({ message: `no worker could be started for ${fn}: ${error.message}` })
        )
        // A worker whose thread ended between jobs is not given this one: it goes, and the job waits for another.
        if (!threads.has(worker.id)) {
          yield* stop(worker)
          return notRun
        }
        const exit = yield* worker.executeEffect(new RunJob({ fn, input, maxOutputBytes })).pipe(
          // Interrupted (the deadline, the caller): a busy thread cannot be asked to stop; end it.
          Effect.onInterrupt(() => stop(worker)),
          Effect.exit
        )
        if (Exit.isSuccess(exit)) return exit.value as A
        const failure = exit.cause._tag === "Fail" ? exit.cause.error : undefined
        if (failure instanceof JobFailed && failure.name === retired) {
          // It ran nothing: another worker runs the job (and this one's end is logged, not blamed on the job).
          yield* stop(worker)
          yield* Effect.logWarning(`a worker of ${options.module.href} was retired: ${failure.message}`)
          return notRun
        }
        if (failure instanceof JobFailed) return yield* Effect.fail(new JobError(failure.name, failure.message, failure.stack))
        // The thread died under the job, or the message could not cross: it is replaced.
        yield* stop(worker)
        const reason = failure !== undefined && "cause" in failure ? String(failure.cause) : "no answer"
        return yield* new WorkerCrashed({ message: `the worker running ${fn} stopped: ${reason}` })
      }))
    // Ends the thread at once and has the pool start another in its place.
    const stop = (worker: Worker.SerializedWorker<RunJob>) =>
      Effect.gen(function*() {
        const thread = threads.get(worker.id)
        threads.delete(worker.id)
        if (thread !== undefined) yield* Effect.promise(() => thread.terminate())
        yield* Pool.invalidate(pool, worker)
      })
    // Once every worker has answered, ready is at once (a worker replaced later starts in the background).
    let answered = false
    const ready = Effect.suspend(() =>
      answered ? Effect.void : Effect.tap(readyAll(run, options.size ?? 2), () => {
        answered = true
      })
    )
    return { run, spawned: () => spawned, threads: () => alive.size, ready }
  })

/** Waits until `size` workers have each answered a ping: started, and their module loaded. */
const readyAll = (
  run: WorkerPool["run"],
  size: number
): Effect.Effect<void, WorkerCrashed | JobError> =>
  Effect.asVoid(Effect.all(Array.from({ length: size }, () => run(ping, undefined)), { concurrency: "unbounded" }))

/** The job every worker answers once its module is loaded: how `ready` knows. */
const ping = ""

// `--import tsx` is not honoured in a worker's execArgv on Node 20: register tsx's loader, then load.
const tsBootstrap = (module: URL): string => {
  // The ESM build of tsx's API, beside the CommonJS one `require.resolve` finds.
  const api = pathToFileURL(createRequire(import.meta.url).resolve("tsx/esm/api").replace(/\.cjs$/, ".mjs")).href
  return `import(${JSON.stringify(api)}).then((tsx) => { tsx.register(); return import(${JSON.stringify(module.href)}) })`
}

/**
 * In the worker module: serves `functions` to the pool, each `(input) => output` (sync or async).
 * A throw is the job's failure, its name and message kept for the error text.
 */
export const serve = (functions: Readonly<Record<string, (input: any) => unknown>>): void =>
  serveJobs(Promise.resolve(functions), async (functions, fn, input) => {
    const f = functions[fn]
    if (f === undefined) throw new Error(`the worker module has no function ${fn}`)
    return await f(input)
  })

/**
 * In a worker: answers jobs with `run(state, fn, input)` once `loaded` gives the state (a module's
 * functions, its tools). A ping (`ready`) is answered once it is loaded.
 */
export const serveJobs = <S>(
  loaded: Promise<S>,
  run: (state: S, fn: string, input: any) => unknown
): void => {
  // An exception that escapes a job (a timer a body left, a promise nobody awaits) would end the thread and fail
  // whichever job it ran next: it is kept, and the worker retires at its next job, which it does not run.
  let escaped: string | undefined
  const keep = (error: unknown) => {
    escaped ??= `${nameOf(error)}: ${messageOf(error)}`
  }
  process.on("uncaughtException", keep)
  process.on("unhandledRejection", keep)
  const runner = WorkerRunner.layerSerialized(RunJob, {
    RunJob: ({ fn, input, maxOutputBytes }) =>
      escaped !== undefined
        ? Effect.fail(new JobFailed({ name: retired, message: `an exception escaped an earlier job (${escaped})` }))
        : Effect.tryPromise({
          try: async () => {
            const state = await loaded
            return fn === ping ? true : crossable(await run(state, fn, input), maxOutputBytes)
          },
          catch: (error) =>
            error instanceof JobFailed ? error : new JobFailed({
              name: nameOf(error),
              message: messageOf(error),
              stack: stackOf(error)
            })
        })
  })
  Effect.runFork(WorkerRunner.launch(Layer.provide(runner, NodeWorkerRunner.layer)))
}

/**
 * `value` when it can cross threads within `max` bytes, measured here in the worker before any copy reaches the
 * caller's thread; else a `JobFailed` named `InvalidOutput` that says why (a function, a symbol, its size).
 */
const crossable = (value: unknown, max: number): unknown => {
  let bytes: number
  try {
    bytes = serialize(value).byteLength
  } catch (error) {
    throw new JobFailed({ name: invalidOutput, message: `the output cannot cross threads (${messageOf(error)})` })
  }
  if (bytes > max) {
    throw new JobFailed({ name: invalidOutput, message: `the output is ${bytes} bytes, over the pool's maxOutputBytes (${max})` })
  }
  return value
}

// What is thrown may be anything (a symbol, an object whose toString throws): read it without throwing again.
const nameOf = (error: unknown): string => {
  try {
    return error instanceof Error && typeof error.name === "string" ? error.name : "Error"
  } catch {
    return "Error"
  }
}

const messageOf = (error: unknown): string => {
  try {
    if (error instanceof Error) return String(error.message)
    return typeof error === "symbol" ? error.toString() : String(error)
  } catch {
    return `a thrown ${typeof error} that has no text`
  }
}

const stackOf = (error: unknown): string | undefined => {
  try {
    return error instanceof Error && typeof error.stack === "string" ? error.stack : undefined
  } catch {
    return undefined
  }
}

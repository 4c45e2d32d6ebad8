/**
 * Reuse of an earlier outcome (design: Per-run reuse, Delivery dedupe), the one mechanism behind the pipeline's
 * `reuse` and `dedupe` options: what makes two calls the same (`sameCall`, `sameDelivery`), and the
 * stores that answer the second with the first's outcome (`Outcomes` for a scope: an agent run, an MCP
 * session; `Deliveries`, the shape of `Idempotency`'s store, for delivered calls).
 */
import { type Duration, Effect, Either, Exit, FiberId, ParseResult } from "effect"
import type * as Tool from "../../Tool.js"
import { ToolResult } from "../../ToolResult.js"
import * as Json from "../util/json.js"
import { Signal } from "../util/signal.js"

/** A call in progress: its result when it completed synchronously, else an effect awaiting it. */
export type Started = ToolResult | Effect.Effect<ToolResult>

/** `Started` as an effect. */
export const awaitStarted = (started: Started): Effect.Effect<ToolResult> =>
  started instanceof ToolResult ? Effect.succeed(started) : started

// ---------------------------------------------------------------------------------------------
// What makes two calls the same.

const inputEncoders = new WeakMap<Tool.Any, (u: unknown) => Either.Either<unknown, ParseResult.ParseIssue>>()

/**
 * The input part of `sameCall`: the canonical JSON of the encoded input (keys sorted, one form for
 * Dates, bigints and defaults), so that two decodings of equal arguments key alike.
 */
export const inputKey = (tool: Tool.Any, input: unknown): string => {
  let encode = inputEncoders.get(tool)
  if (encode === undefined) {
    encode = ParseResult.encodeUnknownEither(tool.input)
    inputEncoders.set(tool, encode)
  }
  const encoded = encode(input)
  return Either.isRight(encoded) ? Json.canonical(encoded.right) : Json.canonical(input)
}

/** "The same call": the same tool with the same decoded input (`inputKey` is the input part). */
export const sameCall = (toolName: string, inputKey: string): string => `${toolName}\n${inputKey}`

/** A delivered call: the pair is the key, never either half. */
export interface DeliveryKey {
  readonly taskId: string
  readonly toolCallId: string
}

/** "The same delivery": the same call id of the same task (a redelivery, a journaled call replayed). */
export const sameDelivery = (key: DeliveryKey): string => `${key.taskId}\u0000${key.toolCallId}`

// ---------------------------------------------------------------------------------------------
// A scope's outcomes, by `sameCall`.

/** How a scope keeps its outcomes. */
export interface OutcomesOptions {
  /**
   * A duplicate that comes while the first call runs waits for its outcome instead of running too
   * (the calls of one agent turn start together). Without it, an outcome counts once it is known.
   */
  readonly joinInFlight: boolean
  /** At most this many bytes of keys and outcomes are kept; past it, an outcome is not. Default: no bound. */
  readonly maxBytes?: number | undefined
}

/**
 * The outcomes of one scope (an agent run, an MCP session), by `sameCall` key: an idempotent tool's
 * first outcome for an input, success or failure, answers the scope's later calls with that input.
 * A call that was interrupted keeps none (it says nothing of the input). Used by one scope only:
 * plain state is enough, since JavaScript runs the lookups and inserts without interleaving.
 */
export class Outcomes {
  private readonly entries = new Map<string, Started>()
  private readonly reusedBy = new Set<string>()
  private bytes = 0
  constructor(readonly options: OutcomesOptions) {}

  /** The outcome known (or, joining in flight, still coming) for `key`. */
  get(key: string): Started | undefined {
    return this.entries.get(key)
  }

  /** Call `toolCallId` was answered by an earlier outcome (design: Per-run reuse): records say so. */
  markReused(toolCallId: string): void {
    this.reusedBy.add(toolCallId)
  }

  /** Whether call `toolCallId` was answered by an earlier outcome. */
  wasReused(toolCallId: string): boolean {
    return this.reusedBy.size > 0 && this.reusedBy.has(toolCallId)
  }

  /**
   * `started` is the first call for `key`: its outcome is kept once known. Joining in flight, later
   * calls wait for it meanwhile (and are interrupted with it, should it be). Returns what the first
   * caller awaits.
   */
  keep(key: string, started: Started): Started {
    if (started instanceof ToolResult) {
      this.put(key, started)
      return started
    }
    if (!this.options.joinInFlight) return Effect.tap(started, (result) => Effect.sync(() => this.put(key, result)))
    if (this.entries.has(key)) return started
    const done = new Signal<ToolResult>()
    this.entries.set(key, done.await)
    return started.pipe(
      Effect.tap((result) =>
        Effect.sync(() => {
          this.entries.delete(key)
          this.put(key, result)
          done.succeed(result)
        })
      ),
      // The first call was interrupted (its run is ending): so are the duplicates waiting on it.
      Effect.onInterrupt(() => Effect.sync(() => done.complete(Exit.interrupt(FiberId.none))))
    )
  }

  /** Keeps `result` for `key` unless an outcome is kept already, the call was interrupted, or it does not fit. */
  private put(key: string, result: ToolResult): void {
    if (this.entries.has(key) || result.failure?._tag === "Interrupted") return
    const maxBytes = this.options.maxBytes
    if (maxBytes !== undefined) {
      const size = key.length + (result.error?.length ?? (JSON.stringify(result.value) ?? "").length)
      if (this.bytes + size > maxBytes) return
      this.bytes += size
    }
    this.entries.set(key, result)
  }

  /** How many distinct keys the scope keeps (or waits for). */
  get size(): number {
    return this.entries.size
  }
}

// ---------------------------------------------------------------------------------------------
// Delivered calls, by `sameDelivery`.

/** What a delivery store needs to know of the tool a delivered call is for. */
export interface ClaimOptions {
  readonly toolName: string
  /** The tool's timeout: how long the claim is kept. */
  readonly timeout: Duration.Duration
  /** An idempotent tool is not re-run after a crash: its outcome is declared unknown instead. */
  readonly idempotent: boolean
  /**
   * Whether the handler has started (design: Interruption and shutdown). An interrupted call whose handler had not started is
   * released (the next delivery runs it); one whose handler had started may have had its effect, so
   * it is treated like a crash. Without it, an interrupted call counts as started.
   */
  readonly started?: (() => boolean) | undefined
}

/** A delivery-dedupe store (`Idempotency`'s): a delivered call runs once however often it is delivered. */
export interface Deliveries {
  /**
   * The outcome of the delivered call `key`: the first delivery's if there was one within the
   * tool's timeout (joining it while it still runs), else `run`'s. `reused` says which.
   */
  readonly once: (
    key: DeliveryKey,
    claim: ClaimOptions,
    run: Effect.Effect<ToolResult>
  ) => Effect.Effect<{ readonly result: ToolResult; readonly reused: boolean }>
}

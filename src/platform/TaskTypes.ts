/**
 * What the modules of the tasks (Tasks.ts) share: a call pending, a suspension, a follower, an agent's
 * usage, how a loop is started, and a task's final event as the journal keeps it. It imports none of them.
 */
import { type Effect, type Fiber, Schema } from "effect"
import type { Signal } from "../internal/util/signal.js"
import type * as LanguageModel from "../LanguageModel.js"
import { TaskEvent } from "../protocol/Protocol.js"
import type { ToolResult } from "../ToolResult.js"

/** A task's final event as the journal keeps it. */
export const EventJson = Schema.parseJson(TaskEvent)

/** A call delivered on its task's stream, or given to a serving process (`route`), waiting for its answer. */
export interface PendingCall {
  readonly event: Extract<TaskEvent, { _tag: "ToolCallRequested" }>
  readonly done: Signal<ToolResult>
  /** When it was last delivered. */
  sentAt: number
  /** The offset of its last delivery in the task's stream (none for a routed call: it is not on the stream). */
  offset: number
  /** A call the task's holder does not serve, given to another process of the agent (TaskRoutes.ts). */
  readonly route?: Route | undefined
}

/** Where a routed call (TaskRoutes.ts) stands: given to a serving process, gone with it, or waiting for one. */
export interface Route {
  /** The process it was given to, and the connection its answer must come from; undefined while it waits for one. */
  worker: { readonly processId: string; readonly connection: string } | undefined
  /** Its worker went away with it (when, and how), until the worker comes back or the call goes to another. */
  gone: { readonly at: number; readonly why: string } | undefined
  /** The last worker that went away with it, and how: what a `TaskWaiting` says while it waits for another. */
  left: { readonly processId: string; readonly why: string } | undefined
}

/**
 * A journaled task waiting for a person (design: Durable runs): its `TaskSuspended`, the calls of it
 * not decided yet, and the fiber that takes the task up when the first approval expires. Its loop has
 * stopped; once every call is decided it runs again from the journal.
 */
export interface Suspension {
  readonly event: Extract<TaskEvent, { _tag: "TaskSuspended" }>
  readonly undecided: Set<string>
  expiry: Fiber.RuntimeFiber<void> | undefined
}

/** Cluster mode: a follower's attachment, and whether this attach is one of its re-attaches (see `Task.attach`). */
export interface Follower {
  readonly attachmentId: string
  readonly reattach: boolean
}

/** Starts a task's loop in the platform's own fiber set. */
export type RunTask = (effect: Effect.Effect<void, never, LanguageModel.LanguageModel>) => Fiber.RuntimeFiber<void, never>

/** What one agent's tasks not ended yet hold, counted against `maxTasksPerAgent` and `maxPromptBytesPerAgent`. */
export interface Usage {
  tasks: number
  promptBytes: number
}

/**
 * Cancelling a task (design: Cancelling a task), by a client of its agent (`CancelTask`) or an operator (the
 * operator API): each call it waits for is told cancelled where it was delivered (`ToolCallCancelled` on the task's
 * stream, or a `cancelled` assignment to the worker it was given to: TaskRoutes.ts), so that the serving process
 * interrupts it; its end is `TaskCancelled`, said on its stream and journaled (a restart does not run it again); its
 * loop is interrupted, and the tasks its `exec_agent` calls started are cancelled the same way.
 */
import { Effect } from "effect"
import type { Book, Task } from "./TaskBook.js"
import { type Cancel, end } from "./TaskChildren.js"
import type { Routes } from "./TaskRoutes.js"

/**
 * How a task is cancelled here: `hold` finds the tasks it started (held here, or taken up from the journal); in cluster
 * mode `elsewhere` cancels them on the runners that hold them.
 */
export const makeCancel = (
  book: Book,
  routes: Routes,
  hold: (taskId: string) => Effect.Effect<Task | undefined>,
  elsewhere?: (taskId: string, by: string, reason: string) => Effect.Effect<void>
): Cancel => {
  const cancel: Cancel = (task, by, reason) =>
    Effect.gen(function*() {
      if (task.final !== undefined) return false
      // Its calls first, while the task holds them: each told cancelled where it was delivered.
      const calls = [...task.pending?.values() ?? []]
      for (const call of calls) {
        if (call.route === undefined) {
          task.emit({ _tag: "ToolCallCancelled", taskId: task.taskId, toolCallId: call.event.toolCallId })
        } else routes.cancel(task, call)
      }
      const children = [...task.children]
      // Its end next: its loop, interrupted, cancels the child tasks its calls wait for (TaskChildren.ts).
      yield* end(book, task, { _tag: "TaskCancelled", taskId: task.taskId, by, reason })
      // And those it waits for no more (it was suspended, or they were left waiting): cancelled too.
      for (const childId of children) {
        const why = `its parent task ${task.taskId} was cancelled`
        if (elsewhere !== undefined) {
          yield* elsewhere(childId, by, why)
          continue
        }
        const child = yield* hold(childId)
        if (child !== undefined) yield* cancel(child, by, why)
      }
      const told = calls.length === 0 ? "" : `; ${calls.length} running call(s) told to stop: ${calls.map((c) => c.event.toolCallId).join(", ")}`
      yield* Effect.logInfo(`task ${task.taskId} (agent ${task.agentId}) cancelled by ${by}${reason === "" ? "" : `: ${reason}`}${told}`)
      return true
    })
  return cancel
}

/**
 * A cluster follower's `TaskWaiting` (ClusterFollow.ts `Passing`): said while the database is away, once
 * until the next event, and never before the stream's greeting `TaskStarted`, whose task id a client
 * takes from the first event (a task submitted just as the database came back had said it first).
 */
import { assert, it } from "@effect/vitest"
import { Chunk, Effect, Mailbox } from "effect"
import type { TaskEvent } from "../../src/protocol/Protocol.js"
import { Passing } from "../../src/platform/ClusterFollow.js"

it.effect("TaskWaiting comes after TaskStarted, once until the next event, and not after the task's end", () =>
  Effect.gen(function*() {
    const out = yield* Mailbox.make<TaskEvent>()
    let away: string | undefined = "connection refused"
    const passing = new Passing("t1", out, () => away)
    const tags = Effect.map(out.takeAll, ([events]) => Chunk.toArray(events).map((e) => e._tag))

    // The database away before the task's greeting: nothing said yet, by the check or by the owner's liveness tick.
    passing.sayIfAway()
    passing.pass({ _tag: "Alive" })
    passing.pass({ _tag: "TaskStarted", taskId: "t1" })
    assert.deepStrictEqual(yield* tags, ["TaskStarted"])

    // Now said, once, until an event comes; then again.
    passing.sayIfAway()
    passing.pass({ _tag: "Alive" })
    passing.sayIfAway()
    const [waiting] = yield* out.takeAll
    assert.deepStrictEqual(Chunk.toArray(waiting).map((e) => e._tag), ["TaskWaiting"])
    assert.include(JSON.stringify(Chunk.toArray(waiting)[0]), "connection refused")
    passing.pass({ _tag: "TurnStarted", taskId: "t1", step: 1, offset: 1 })
    passing.sayIfAway()
    assert.deepStrictEqual(yield* tags, ["TurnStarted", "TaskWaiting"])

    // Back, then the end: nothing more said even if it goes away again.
    away = undefined
    passing.pass({ _tag: "TaskCompleted", taskId: "t1", output: "done", offset: 2 } as TaskEvent)
    away = "gone again"
    passing.sayIfAway()
    assert.deepStrictEqual(yield* tags, ["TaskCompleted"])
  }))

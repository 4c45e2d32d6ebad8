/**
 * Compile-time checks (`tsc --noEmit` runs them): a run names `SessionBusy` and needs a `Journal` only when it is
 * given a session, and a `LanguageModel` only when not given its model; an agent's runs fail with `GuardrailTripped` only when it has guardrails.
 */
import { Effect, type Stream } from "effect"
import { Agent, Guardrail, type Journal, type LanguageModel, type Session } from "../../src/index.js"

type Equals<X, Y> = (<T>() => T extends X ? 1 : 2) extends (<T>() => T extends Y ? 1 : 2) ? true : false
type Expect<T extends true> = T
/** Each assignable to the other: for a type that resolves through a conditional type `Equals` sees unresolved. */
type Same<X, Y> = [X] extends [Y] ? [Y] extends [X] ? true : false : false

const plain = Agent.make({ tools: [] })
const bare = Agent.run(plain, "hi")
export type BareFailsOnlySo = Expect<Equals<Effect.Effect.Error<typeof bare>, Agent.RunFailure>>
export type BareNeedsOnlyAModel = Expect<Equals<Effect.Effect.Context<typeof bare>, LanguageModel.LanguageModel>>

const ofSession = Agent.run(plain, "hi", { session: "s-42" })
export type SessionMayBeBusy = Expect<Equals<Effect.Effect.Error<typeof ofSession>, Agent.RunFailure | Session.SessionBusy>>
export type SessionNeedsAJournal = Expect<
  Same<Effect.Effect.Context<typeof ofSession>, LanguageModel.LanguageModel | Journal.Journal>
>
export type BareNeedsNoJournal = Expect<Same<Extract<Effect.Effect.Context<typeof bare>, Journal.Journal>, never>>
const withRunId = Agent.run(plain, "hi", { runId: "r-1" })
export type RunIdIsNoSession = Expect<Equals<Effect.Effect.Error<typeof withRunId>, Agent.RunFailure | Agent.RunIdInUse>>

const guarded = Agent.make({ tools: [], guardrails: { input: [Guardrail.make("g", () => Effect.succeed(Guardrail.pass))] } })
const guardedRun = Agent.run(guarded, "hi")
export type GuardedMayTrip = Expect<Equals<Effect.Effect.Error<typeof guardedRun>, Agent.RunFailure | Guardrail.GuardrailTripped>>

// A run given its model in the options needs no LanguageModel; a stream of one neither.
const given = Agent.run(plain, "hi", { model: {} as LanguageModel.ScriptedModel })
export type GivenNeedsNoModel = Expect<Same<Effect.Effect.Context<typeof given>, never>>
const givenStream = Agent.stream(plain, "hi", { model: {} as LanguageModel.ScriptedModel })
export type GivenStreamNeedsNoModel = Expect<Same<Stream.Stream.Context<typeof givenStream>, never>>
const givenInSession = Agent.run(plain, "hi", { model: {} as LanguageModel.ScriptedModel, session: "s-1" })
export type GivenInSessionNeedsAJournalOnly = Expect<Same<Effect.Effect.Context<typeof givenInSession>, Journal.Journal>>

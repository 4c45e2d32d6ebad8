/**
 * Whether a fiber's spans reach anyone. Effect's own default tracer keeps spans in memory and
 * hands them to nobody: with it, and no tracer of the user's (`Effect.withTracer`, an OTLP
 * layer) in place, our spans (`invoke_agent`, `chat`, `execute_tool`) are work for nothing, so
 * they are not made at all. A user who installs any tracer gets every span; one who turns
 * tracing off (`Effect.withTracerEnabled(false)`) gets none, as before.
 */
import { Context, DefaultServices, FiberRef, FiberRefs, type Runtime, Tracer } from "effect"
import type { Fiber } from "effect"

/** The tracer every fiber has unless somebody installs another: nobody reads its spans. */
const unheard = Context.get(DefaultServices.liveServices, Tracer.Tracer)

/** True when tracing is on and a tracer other than Effect's silent default is installed. */
export const listening = (fiber: Fiber.RuntimeFiber<unknown, unknown>): boolean =>
  fiber.getFiberRef(FiberRef.currentTracerEnabled) && fiber.currentTracer !== unheard

/** `listening`, for what a runtime's fibers would be. */
export const runtimeListening = (runtime: Runtime.Runtime<never>): boolean =>
  FiberRefs.getOrDefault(runtime.fiberRefs, FiberRef.currentTracerEnabled) &&
  Context.get(FiberRefs.getOrDefault(runtime.fiberRefs, DefaultServices.currentServices), Tracer.Tracer) !== unheard

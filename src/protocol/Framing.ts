/**
 * The platform protocol's JSON framing (design: Serving, The platform): `@effect/rpc`'s messages,
 * each as one JSON text frame, both ways. `RpcServer` and `RpcClient` apply the group's Schemas
 * (Protocol.ts); the transport (platform/Wire.ts) only moves the text. Smaller than
 * `RpcSerialization.json`'s messages: numeric ids, no headers (the token travels once, as the
 * `authorization` header of the WebSocket upgrade), a call's outcome flat rather than an `Exit`.
 *
 * Frames, client to platform:
 *   `{ "id": 7, "call": "Register", "payload": { ... } }`   a call (a stream call too); with
 *       `"traceId"` and `"spanId"` when the caller's span is sampled: the parent of the platform's span
 *   `{ "id": 7, "cancel": true }`                            stop a call or stream
 * Platform to client:
 *   `{ "id": 7, "ok": <success> }`        a call's success (no `ok` for a void success; a stream's end)
 *   `{ "id": 7, "events": [ ... ] }`      a stream's next events
 *   `{ "id": 7, "error": <typed error> }` a call's typed failure
 *   `{ "id": 7, "defect": "text" }`       the call could not run (unknown call, invalid payload, a bug)
 *   `{ "defect": "text" }`                a frame that could not be read at all
 */
import * as RpcSchema from "@effect/rpc/RpcSchema"
import type { FromServerEncoded, InterruptEncoded, RequestEncoded } from "@effect/rpc/RpcMessage"
import { Predicate, Schema } from "effect"
import type { NonEmptyReadonlyArray } from "effect/Array"
import * as Json from "../internal/util/json.js"
import { PlatformRpcs } from "./Protocol.js"
import { clip } from "../internal/util/text.js"

/**
 * The largest frame the platform accepts, by default: 2 MiB, room for a call's 1 MiB of arguments or
 * a 1 MiB result (Invocation's limits) with the frame around it.
 */
export const defaultMaxFrameBytes = 2 * 1024 * 1024

/** The largest frame a client accepts from the platform, by default: 16 MiB (a model's long text). */
export const defaultClientMaxFrameBytes = 16 * 1024 * 1024

/** Frames nested deeper than this are refused before they are decoded (results are held to 128). */
export const maxFrameDepth = 512

/** Error texts in frames are cut to this many characters. */
const maxTextLength = 2048

/** A call's frame would be over the platform's frame limit: it was not sent. */
export class FrameTooLarge extends Schema.TaggedError<FrameTooLarge>("agent-tools/FrameTooLarge")("FrameTooLarge", {
  call: Schema.String,
  bytes: Schema.Number,
  limit: Schema.Number
}) {
  override get message(): string {
    return `the ${this.call} frame is ${this.bytes} bytes, over the platform's limit of ${this.limit}`
  }
}

/** The calls a wire carries: `PlatformRpcs`'s, or another group's on the same framing (the serve bench's rpc echo). */
export interface Calls {
  readonly requests: ReadonlyMap<string, { readonly _tag: string; readonly successSchema: Schema.Schema.All }>
}

/** The calls of each group whose success is a stream of events. */
const streamCallsOf = new WeakMap<Calls, ReadonlySet<string>>()

/** Whether `call` of `group` answers with a stream of events. */
export const isStream = (call: string, group: Calls = PlatformRpcs): boolean => {
  let streams = streamCallsOf.get(group)
  if (streams === undefined) {
    streams = new Set(
      [...group.requests.values()].filter((rpc) => RpcSchema.isStreamSchema(rpc.successSchema)).map((rpc) => rpc._tag)
    )
    streamCallsOf.set(group, streams)
  }
  return streams.has(call)
}

/** Cuts `text` to the frames' limit. */
const bounded = (text: string): string => clip(text, maxTextLength)

/** A defect as `Schema.Defect` encodes it (a text, or an error's name and message), as text. */
const defectText = (defect: unknown): string => {
  if (typeof defect === "string") return bounded(defect)
  if (typeof defect === "object" && defect !== null && "message" in defect && typeof defect.message === "string") {
    return bounded(defect.message)
  }
  return Json.preview(defect, maxTextLength)
}

/** A frame as text; a value the platform built itself that cannot be written is said so rather than thrown. */
const stringify = (frame: { readonly id?: number; readonly [key: string]: unknown }): string => {
  try {
    return JSON.stringify(frame)
  } catch (error) {
    const defect = `the answer could not be written: ${defectText(error instanceof Error ? error.message : String(error))}`
    return JSON.stringify(frame.id === undefined ? { defect } : { id: frame.id, defect })
  }
}

/** The answer that refuses a frame: `id`'s defect, or the connection's when the frame had no readable id. */
export const refusal = (id: number | undefined, text: string): string =>
  JSON.stringify(id === undefined ? { defect: bounded(text) } : { id, defect: bounded(text) })

// ---------------------------------------------------------------------------------------------
// The platform's side.

/** A client's frame as `RpcServer` takes it, or the answer that refuses it. */
export type ClientFrame =
  | { readonly _tag: "Request"; readonly id: number; readonly message: RequestEncoded }
  | InterruptEncoded
  | { readonly _tag: "Refused"; readonly answer: string }

const refused = (id: number | undefined, text: string): ClientFrame => ({ _tag: "Refused", answer: refusal(id, text) })

/**
 * The id and the call a frame starts with, read from its first characters without parsing it (our
 * clients write them first); undefined if it does not start so.
 */
export const leadingCall = (start: string): { readonly id: number; readonly call: string } | undefined => {
  const found = /^\s*\{\s*"id"\s*:\s*(\d{1,15})\s*,\s*"call"\s*:\s*"(\w{1,32})"/.exec(start)
  return found === null ? undefined : { id: Number(found[1]), call: found[2]! }
}

/** The refusal of a frame nested too deep; the id, when it comes first (as ours send it), is read from its start. */
const tooDeep = (start: string): ClientFrame => {
  const id = /^\s*\{\s*"id"\s*:\s*(\d{1,15})\s*,/.exec(start)?.[1]
  return refused(id === undefined ? undefined : Number(id), `the frame is nested deeper than ${maxFrameDepth} levels`)
}

/**
 * `readClientFrame` on a frame's UTF-8 bytes, as the WebSocket gives them: one nested too deep is
 * refused before it is decoded (2 MB of text takes milliseconds to make, for nothing).
 */
export const readClientBytes = (
  bytes: Uint8Array,
  headers: ReadonlyArray<[string, string]>,
  group: Calls = PlatformRpcs
): ClientFrame =>
  Json.bytesDeeperThan(bytes, maxFrameDepth + 1)
    ? tooDeep(new TextDecoder().decode(bytes.subarray(0, 64)))
    : readFrame(new TextDecoder().decode(bytes), headers, group)

/**
 * Reads a client's frame (design: Hostile clients): whatever it holds, a request for a known call
 * whose payload is no deeper than `maxFrameDepth`, a cancel, or the answer that refuses it. The
 * request carries `headers` (the upgrade's). Never throws on what a client sends.
 */
export const readClientFrame = (
  text: string,
  headers: ReadonlyArray<[string, string]>,
  group: Calls = PlatformRpcs
): ClientFrame =>
  // Refused before it is parsed: building a value nested a million deep holds the loop for a second.
  // The envelope is one level.
  Json.textDeeperThan(text, maxFrameDepth + 1) ? tooDeep(text) : readFrame(text, headers, group)

/**
 * A frame whose text nests no deeper than `maxFrameDepth + 1` (checked on its text or its bytes, once):
 * its payload, one level in, is then no deeper than `maxFrameDepth`, and is not walked again.
 */
const readFrame = (text: string, headers: ReadonlyArray<[string, string]>, group: Calls): ClientFrame => {
  let frame: unknown
  try {
    // V8's parser does not recurse: any depth parses; the depth check comes next.
    frame = JSON.parse(text)
  } catch {
    return refused(undefined, "the frame is not valid JSON")
  }
  if (!Predicate.isRecord(frame)) return refused(undefined, "a frame must be a JSON object with an id and a call")
  const { call, cancel, id, payload, spanId, traceId } = frame
  if (typeof id !== "number" || !Number.isSafeInteger(id)) return refused(undefined, "a frame must have a numeric id")
  if (cancel === true) return { _tag: "Interrupt", requestId: String(id) }
  if (typeof call !== "string" || !group.requests.has(call)) {
    return refused(id, `unknown call ${Json.preview(call)}; the calls are ${[...group.requests.keys()].join(", ")}`)
  }
  const traced = typeof traceId === "string" && typeof spanId === "string"
  return {
    _tag: "Request",
    id,
    message: {
      _tag: "Request",
      id: String(id),
      tag: call,
      payload,
      headers,
      ...(traced ? { traceId: bounded(traceId), spanId: bounded(spanId), sampled: true } : {})
    }
  }
}

/** What a failed call's cause tells its client: the first typed error, else the first defect, else nothing (interrupted). */
const failureOf = (cause: Schema.CauseEncoded<unknown, unknown>): { readonly error: unknown } | { readonly defect: string } | undefined => {
  let defect: string | undefined
  const pending: Array<Schema.CauseEncoded<unknown, unknown>> = [cause]
  while (pending.length > 0) {
    const next = pending.pop()!
    switch (next._tag) {
      case "Fail":
        return { error: next.error }
      case "Die":
        defect ??= defectText(next.defect)
        break
      case "Sequential":
      case "Parallel":
        pending.push(next.right, next.left)
        break
    }
  }
  return defect === undefined ? undefined : { defect }
}

/**
 * `RpcServer`'s message as the frame that carries it to the client; undefined for what the client
 * is not sent (an interrupted call's end: the client cancelled it, or the platform is closing its
 * connection; a pong: the transport keeps the connection alive).
 */
export const serverFrame = (message: FromServerEncoded): string | undefined => {
  switch (message._tag) {
    case "Chunk":
      return stringify({ id: Number(message.requestId), events: message.values })
    case "Exit": {
      const id = Number(message.requestId)
      if (message.exit._tag === "Success") {
        return stringify(message.exit.value === undefined ? { id } : { id, ok: message.exit.value })
      }
      const failure = failureOf(message.exit.cause)
      return failure === undefined ? undefined : stringify({ id, ...failure })
    }
    case "Defect":
      return stringify({ defect: defectText(message.defect) })
    default:
      return undefined
  }
}

// ---------------------------------------------------------------------------------------------
// The client's side.

/** A call's frame. */
export const callFrame = (request: RequestEncoded): string =>
  JSON.stringify(
    // An unsampled span (a disabled tracer's too) has nothing to continue on the platform.
    request.sampled === true
      ? { id: Number(request.id), call: request.tag, payload: request.payload, traceId: request.traceId, spanId: request.spanId }
      : { id: Number(request.id), call: request.tag, payload: request.payload }
  )

/** The frame that stops call `requestId`. */
export const cancelFrame = (requestId: string): string => `{"id":${Number(requestId)},"cancel":true}`

/** `text`'s size in bytes when it is over `limit` (a character is one to three UTF-8 bytes: only a long text is measured). */
export const bytesOver = (text: string, limit: number): number | undefined => {
  if (text.length * 3 <= limit) return undefined
  const bytes = Buffer.byteLength(text, "utf8")
  return bytes > limit ? bytes : undefined
}

const isNonEmpty = (value: unknown): value is NonEmptyReadonlyArray<unknown> => Array.isArray(value) && value.length > 0

/**
 * A platform's frame as `RpcClient` takes it; undefined for one no call waits on (unreadable, or
 * without an id: nothing this client sends is refused so). `callOf` names a call by its request id,
 * for the text of its defect.
 */
export const readServerFrame = (
  text: string,
  callOf: (requestId: string) => string | undefined
): FromServerEncoded | undefined => {
  let frame: unknown
  try {
    frame = JSON.parse(text)
  } catch {
    return undefined
  }
  if (!Predicate.isRecord(frame) || typeof frame.id !== "number") return undefined
  const record = frame
  const requestId = String(record.id)
  if ("events" in record) return isNonEmpty(record.events) ? { _tag: "Chunk", requestId, values: record.events } : undefined
  if ("error" in record) return { _tag: "Exit", requestId, exit: { _tag: "Failure", cause: { _tag: "Fail", error: record.error } } }
  if ("defect" in record) {
    const message = `the platform could not run ${callOf(requestId) ?? "the call"}: ${defectText(record.defect)}`
    return { _tag: "Exit", requestId, exit: { _tag: "Failure", cause: { _tag: "Die", defect: { name: "Error", message } } } }
  }
  return { _tag: "Exit", requestId, exit: { _tag: "Success", value: record.ok } }
}

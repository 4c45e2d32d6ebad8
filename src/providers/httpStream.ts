/**
 * Reading a model's response within its bounds (docs/limits.md, "Model requests"): the limits of one
 * request (`Limits`, from a provider's `LimitOptions`), its bytes counted as they come, its text cut
 * into lines none of which may pass its bound, and the lines read as server-sent events.
 */
import { Duration, Effect, Option, Stream } from "effect"
import type * as LanguageModel from "../LanguageModel.js"

/**
 * What one model request may take (docs/limits.md, "Model requests"): the whole response, from the
 * request to its last byte (`timeout`); the wait for its headers and between two pieces of its body
 * (`idleTimeout`, at most `timeout`); its size in bytes and its longest line (a server-sent event's
 * line, or a whole JSON body), past which it is refused before it is read further.
 */
export interface Limits {
  readonly timeout: Duration.Duration
  readonly idleTimeout: Duration.Duration
  readonly maxResponseBytes: number
  readonly maxLineBytes: number
}

/** A provider's options for `Limits`: each left out takes its default. */
export interface LimitOptions {
  /** The whole response, from the request to its last byte. Default 10 minutes. */
  readonly timeout?: Duration.DurationInput | undefined
  /** The response's headers, then each piece of its body after the one before. Default 2 minutes (at most `timeout`). */
  readonly idleTimeout?: Duration.DurationInput | undefined
  /** The response's size, in bytes. Default 32 MiB. */
  readonly maxResponseBytes?: number | undefined
  /** One line of a stream (or a whole JSON body), in bytes. Default 8 MiB. */
  readonly maxLineBytes?: number | undefined
}

/** The limits of `options`, defaults filled in; a bad one is a defect naming it (a provider's layer is built from code). */
export const limitsOf = (options: LimitOptions): Limits => {
  const timeout = Duration.decode(options.timeout ?? "10 minutes")
  const idle = Duration.decode(options.idleTimeout ?? "2 minutes")
  const count = (name: string, value: number | undefined, fallback: number) => {
    if (value === undefined) return fallback
    if (!Number.isSafeInteger(value) || value <= 0) throw new Error(`${name} must be a positive whole number of bytes, got ${value}`)
    return value
  }
  return {
    timeout,
    idleTimeout: Duration.min(idle, timeout),
    maxResponseBytes: count("maxResponseBytes", options.maxResponseBytes, 32 * 1024 * 1024),
    maxLineBytes: count("maxLineBytes", options.maxLineBytes, 8 * 1024 * 1024)
  }
}

/** One server-sent event: its `event` field (`"message"` when it had none) and its `data` lines, joined. */
export interface SseEvent {
  readonly event: string
  readonly data: string
  /** A whole JSON body's value (`wholeBody`), parsed once. */
  readonly body?: unknown
}

/**
 * The lines of an event stream as its events (the WHATWG rules used here: `event:` and `data:`
 * fields, `:` comments, a blank line ends an event; an event cut off by the end is dropped).
 */
export const sseEvents = <E, R>(lines: Stream.Stream<string, E, R>): Stream.Stream<SseEvent, E, R> =>
  Stream.suspend(() => {
    let event = ""
    let data: Array<string> = []
    return Stream.filterMap(lines, (line) => {
      if (line === "") {
        if (data.length === 0) {
          event = ""
          return Option.none()
        }
        const out = { event: event === "" ? "message" : event, data: data.join("\n") }
        event = ""
        data = []
        return Option.some(out)
      }
      if (line.startsWith(":")) return Option.none()
      const colon = line.indexOf(":")
      const field = colon === -1 ? line : line.slice(0, colon)
      const value = colon === -1 ? "" : line.slice(line[colon + 1] === " " ? colon + 2 : colon + 1)
      if (field === "event") event = value
      else if (field === "data") data.push(value)
      return Option.none()
    })
  })

/** Fails with `tooMany()` once the chunks passing through add up to more than `limit` bytes. */
export const counted = (limit: number, tooMany: () => LanguageModel.ModelError) =>
<E, R>(chunks: Stream.Stream<Uint8Array, E, R>): Stream.Stream<Uint8Array, E | LanguageModel.ModelError, R> =>
  Stream.suspend(() => {
    let total = 0
    return Stream.mapEffect(chunks, (chunk) => (total += chunk.byteLength) > limit ? Effect.fail(tooMany()) : Effect.succeed(chunk))
  })

/**
 * Text split into lines (`\n`, `\r\n` or `\r`, as `Stream.splitLines`), failing with `tooLong()` as soon as a
 * line, ended or not, passes `limit` characters (a character is at least a byte: the bound in bytes holds).
 */
export const boundedLines = (limit: number, tooLong: () => LanguageModel.ModelError) =>
<E, R>(text: Stream.Stream<string, E, R>): Stream.Stream<string, E | LanguageModel.ModelError, R> =>
  Stream.suspend(() => {
    let rest = ""
    let cr = false
    return text.pipe(
      Stream.mapConcatEffect((piece) => {
        const lines: Array<string> = []
        let start = 0
        for (let i = 0; i < piece.length; i++) {
          const c = piece.charCodeAt(i)
          if (c === 10 && cr) {
            // The \n of a \r\n whose \r ended the piece before.
            cr = false
            start = i + 1
            continue
          }
          cr = false
          if (c === 10 || c === 13) {
            lines.push(rest + piece.slice(start, i))
            rest = ""
            start = i + 1
            if (c === 13) {
              if (piece.charCodeAt(i + 1) === 10) {
                i++
                start = i + 1
              } else if (i + 1 === piece.length) cr = true
            }
          }
        }
        rest += piece.slice(start)
        return rest.length > limit || lines.some((line) => line.length > limit)
          ? Effect.fail(tooLong())
          : Effect.succeed(lines)
      }),
      Stream.concat(Stream.suspend(() => rest === "" ? Stream.empty : Stream.make(rest)))
    )
  })

/** The event name under which a whole JSON body (a server that did not stream) reaches a provider's reader. */
export const wholeBody = "agent-tools/whole-body"

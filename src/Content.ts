/**
 * Outputs that are MCP content rather than JSON (design: Content): text, an image, audio, an embedded
 * resource, or a mix. A tool declares one of these Schemas as its output and returns the values the
 * constructors make; `Mcp` answers `tools/call` with the items as `content` (and no
 * `structuredContent`), the agent loop gives the model a text rendering (`render`), and other callers
 * (`Invocation.run`, the platform) get the items as JSON values, in MCP's shape.
 */
import { Encoding, Schema } from "effect"

/** Marks an output Schema whose values are MCP content. */
export const ContentId: unique symbol = Symbol.for("agent-tools/Content")

/** Base64, as MCP carries binary data. */
const Base64 = Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9+/]*={0,2}$/))

/** Text. */
export const Text = Schema.Struct({ type: Schema.Literal("text"), text: Schema.String })
export type Text = typeof Text.Type

/** An image: base64 `data` of `mimeType` (`image/png`, say). */
export const Image = Schema.Struct({ type: Schema.Literal("image"), data: Base64, mimeType: Schema.String })
export type Image = typeof Image.Type

/** Audio: base64 `data` of `mimeType` (`audio/wav`, say). */
export const Audio = Schema.Struct({ type: Schema.Literal("audio"), data: Base64, mimeType: Schema.String })
export type Audio = typeof Audio.Type

/** An embedded resource: its `uri`, and its `text` or its base64 `blob`. */
export const Resource = Schema.Struct({
  type: Schema.Literal("resource"),
  resource: Schema.Union(
    Schema.Struct({ uri: Schema.String, mimeType: Schema.optional(Schema.String), text: Schema.String }),
    Schema.Struct({ uri: Schema.String, mimeType: Schema.optional(Schema.String), blob: Base64 })
  )
})
export type Resource = typeof Resource.Type

/** One item of any kind: an output of one item. */
export const Item = Schema.Union(Text, Image, Audio, Resource).annotations({ [ContentId]: true })
export type Item = typeof Item.Type

/** Several items, of any kinds, in order: an output that is a mix. */
export const Items = Schema.Array(Item).annotations({ [ContentId]: true })
export type Items = typeof Items.Type

/** True when `schema` is one of this module's output Schemas (`Item`, `Items`). */
export const isContentSchema = (schema: Schema.Schema.Any): boolean => schema.ast.annotations[ContentId] === true

const base64Of = (data: string | Uint8Array): string => typeof data === "string" ? data : Encoding.encodeBase64(data)

/** A text item. */
export const text = (text: string): Text => ({ type: "text", text })

/** An image item; `data` as bytes or already base64. */
export const image = (options: { readonly data: string | Uint8Array; readonly mimeType: string }): Image => ({
  type: "image",
  data: base64Of(options.data),
  mimeType: options.mimeType
})

/** An audio item; `data` as bytes or already base64. */
export const audio = (options: { readonly data: string | Uint8Array; readonly mimeType: string }): Audio => ({
  type: "audio",
  data: base64Of(options.data),
  mimeType: options.mimeType
})

/** An embedded resource: its text, or its bytes (`blob`, as bytes or already base64). */
export const resource = (
  options:
    | { readonly uri: string; readonly mimeType?: string | undefined; readonly text: string }
    | { readonly uri: string; readonly mimeType?: string | undefined; readonly blob: string | Uint8Array }
): Resource => ({
  type: "resource",
  resource: {
    uri: options.uri,
    ...(options.mimeType === undefined ? {} : { mimeType: options.mimeType }),
    ...("text" in options ? { text: options.text } : { blob: base64Of(options.blob) })
  }
})

/** The size of base64 `data` in bytes. */
const bytesOf = (data: string): number => {
  const padding = data.endsWith("==") ? 2 : data.endsWith("=") ? 1 : 0
  return Math.max(0, Math.floor(data.length * 3 / 4) - padding)
}

/**
 * Content as a model reads it, one item a line: a text as it is, an image `[image image/png, 1234
 * bytes]`, audio the same, a resource `[resource <uri>, <mimeType>]` then its text, or its bytes' count.
 */
export const render = (content: Item | Items): string => {
  const items: ReadonlyArray<Item> = Array.isArray(content) ? content : [content as Item]
  return items.map(renderItem).join("\n")
}

const renderItem = (item: Item): string => {
  switch (item.type) {
    case "text":
      return item.text
    case "image":
    case "audio":
      return `[${item.type} ${item.mimeType}, ${bytesOf(item.data)} bytes]`
    case "resource": {
      const { resource } = item
      const head = `[resource ${resource.uri}${resource.mimeType === undefined ? "" : `, ${resource.mimeType}`}`
      return "text" in resource ? `${head}]\n${resource.text}` : `${head}, ${bytesOf(resource.blob)} bytes]`
    }
  }
}

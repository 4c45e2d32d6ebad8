/** The outcome of one tool call (design: Error text): the encoded output in `value`, or the error text in `error`. */
import { Schema } from "effect"

/** The outcome of one call: the encoded output in `value`, or the error text in `error`. */
export class ToolResult {
  /** A failed result whose text is `error`. */
  static failure(error: string): ToolResult {
    return new ToolResult(undefined, error)
  }

  constructor(
    /** The encoded output (plain JSON), when the call succeeded. */
    readonly value: unknown,
    /** The error text the model reads, when it did not. */
    readonly error: string | undefined
  ) {}
  /** True when the call produced a value: derived, never set. */
  get success(): boolean {
    return this.error === undefined
  }
}

/** `ToolResult` on the wire: `{ value }` or `{ error }`. */
export const ToolResultFromJson: Schema.Schema<ToolResult, { readonly value?: unknown; readonly error?: string }> =
  Schema.transform(
    Schema.Struct({
      value: Schema.optionalWith(Schema.Unknown, { exact: true }),
      error: Schema.optionalWith(Schema.String, { exact: true })
    }),
    Schema.instanceOf(ToolResult),
    {
      strict: true,
      decode: ({ error, value }) => new ToolResult(error === undefined ? value : undefined, error),
      encode: (result) => result.error === undefined ? { value: result.value } : { error: result.error }
    }
  )


/** The error text of an error value or defect: `<Name>: <message>`. */
export const errorText = (error: unknown): string => {
  if (typeof error !== "object" || error === null) return `Error: ${String(error)}`
  const record = error as Record<string, unknown>
  const ctor = (error as { constructor?: { name?: unknown } }).constructor
  const name = typeof record._tag === "string" ? record._tag
    : typeof ctor?.name === "string" && ctor.name !== "" && ctor !== Object ? ctor.name
    : "Error"
  const message = typeof record.message === "string" ? record.message : ""
  if (message !== "") return `${name}: ${message}`
  const fields = fieldsJson(record)
  return fields === undefined ? name : `${name}: ${fields}`
}

// A tagged error with no message still says something useful through its fields.
const fieldsJson = (record: Record<string, unknown>): string | undefined => {
  const fields: Record<string, unknown> = {}
  let any = false
  for (const key of Object.keys(record)) {
    if (key === "_tag" || key === "message" || key === "stack" || key === "name" || key === "cause") continue
    fields[key] = record[key]
    any = true
  }
  if (!any) return undefined
  try {
    return JSON.stringify(fields)
  } catch {
    return undefined
  }
}

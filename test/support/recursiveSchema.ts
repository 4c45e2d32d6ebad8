/** A recursive input Schema (a category and its sub-categories), for the strict-form tests. */
import { Schema } from "effect"

export interface Category {
  readonly name: string
  readonly sub: ReadonlyArray<Category>
}

export const Category: Schema.Schema<Category> = Schema.Struct({
  name: Schema.String,
  sub: Schema.Array(Schema.suspend(() => Category))
}).annotations({ identifier: "Category" })

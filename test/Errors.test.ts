/**
 * The package's errors (design: Errors), from every entry: no two error classes share a `_tag`, so `catchTag` and a
 * failure's text (`<Tag>: <message>`) always name one of them.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Mcp from "../src/exports/mcp.js"
import * as Platform from "../src/exports/platform.js"
import * as Protocol from "../src/exports/protocol.js"
import * as Providers from "../src/exports/providers.js"
import * as Serve from "../src/exports/serve.js"
import * as Package from "../src/index.js"
import * as Cluster from "../src/platform/Cluster.js"

/** Every error class the modules export, with the name it is exported under and its `_tag`. */
const errorClasses = (modules: Record<string, Record<string, unknown>>) => {
  const found = new Map<Function, { readonly tag: string; readonly names: Array<string> }>()
  for (const [moduleName, module] of Object.entries(modules)) {
    for (const [name, value] of Object.entries(module)) {
      if (typeof value !== "function" || !(value.prototype instanceof Error)) continue
      // A Schema.TaggedError has its tag on the class; a Data.TaggedError on each instance.
      const onClass = (value as { readonly _tag?: unknown })._tag
      const tag = typeof onClass === "string"
        ? onClass
        : (new (value as new(args: object) => { readonly _tag?: unknown })({}))._tag
      if (typeof tag !== "string") continue
      const seen = found.get(value)
      if (seen === undefined) found.set(value, { tag, names: [`${moduleName}.${name}`] })
      else seen.names.push(`${moduleName}.${name}`)
    }
  }
  return [...found.values()]
}

describe("Errors (design: Errors)", () => {
  it("no two error classes of the package share a _tag", () => {
    const modules: Record<string, Record<string, unknown>> = {
      ...Package, ...Providers, ...Mcp, ...Serve, ...Protocol, ...Platform, Cluster
    }
    const classes = errorClasses(modules)
    // The collection itself works: some known ones are there.
    const tags = classes.map((c) => c.tag)
    for (const known of ["ManifestError", "NoPendingApproval", "TaskLost", "NotMigrated", "JobFailed"]) {
      assert.include(tags, known)
    }
    const byTag = new Map<string, Array<string>>()
    for (const { names, tag } of classes) byTag.set(tag, [...(byTag.get(tag) ?? []), names.join(" = ")])
    const shared = [...byTag].filter(([, owners]) => owners.length > 1).map(([tag, owners]) => `${tag}: ${owners.join(", ")}`)
    assert.deepStrictEqual(shared, [])
  })
})

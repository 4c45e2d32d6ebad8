/**
 * The docs cannot rot: every TypeScript block of README.md and docs/ is a file under examples/
 * (compiled by `npm run check`, written into the docs by `npm run docs:examples`), the examples run
 * and give what the docs say, and every link of the docs leads to a file of the repository.
 */
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, Layer, Logger, Schema } from "effect"
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join, normalize, relative } from "node:path"
import * as DocsExamples from "../scripts/docs-examples.js"
import { Hooks, Invocation, LanguageModel, Tool } from "../src/index.js"
import * as AgentsExample from "../examples/agents.js"
import * as DurableRunsExample from "../examples/durable-runs.js"
import * as HandlerShapesExample from "../examples/handler-shapes.js"
import * as HooksExample from "../examples/hooks.js"
import * as LoggingExample from "../examples/logging.js"
import * as Quickstart from "../examples/quickstart.js"
import * as Shop from "../examples/shop.js"
import * as SubAgentsExample from "../examples/sub-agents.js"
import * as ToolsExample from "../examples/tools.js"
// A test itself (`it.scoped`): importing it here runs it, in this file.
import "../examples/served-task.test.js"

const { root } = DocsExamples
const read = (path: string) => readFileSync(join(root, path), "utf8")
/** The `.ts` files under a folder of the project, as paths from its root. */
const walk = (dir: string): Array<string> =>
  readdirSync(join(root, dir), { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? walk(`${dir}/${entry.name}`) : entry.name.endsWith(".ts") ? [`${dir}/${entry.name}`] : []
  )

describe("docs: code blocks", () => {
  it("every ts block of README.md and docs/ has its marker and equals its example (npm run docs:examples)", () => {
    assert.deepStrictEqual(DocsExamples.check(), [])
  })

  const files: Record<string, string> = {
    "examples/a.ts": [
      "import { Tool } from \"../src/index.js\"",
      "export const f = () => {",
      "  // #region inner",
      "  const x = 1",
      "  // #region nested",
      "  const y = x",
      "  // #endregion",
      "  return y",
      "  // #endregion",
      "}"
    ].join("\n")
  }
  const load: DocsExamples.Load = (path) => files[path]

  it("writes a block from its file, a region dedented, the package imported by its name", () => {
    const marker = "<!-- example: examples/a.ts#inner -->"
    const doc = [marker, "```ts", "old", "```", "", "```sh", "npm test", "```"].join("\n")
    const { problems, text } = DocsExamples.renderDoc("doc.md", doc, load)
    assert.deepStrictEqual(problems, [])
    const written = [marker, "```ts", "const x = 1", "const y = x", "return y", "```", "", "```sh", "npm test", "```"]
    assert.strictEqual(text, written.join("\n"))
    const whole = DocsExamples.renderDoc("doc.md", "<!-- example: examples/a.ts -->\n```ts\n```", load)
    assert.isTrue(whole.text.includes("import { Tool } from \"agent-tools\""))
    assert.isFalse(whole.text.includes("#region"))
  })

  it("names each block without a marker, each marker without a block, a missing file or region", () => {
    const doc = [
      "```ts", "const a = 1", "```",
      "<!-- example: examples/a.ts -->", "",
      "<!-- example: examples/none.ts -->", "```ts", "```",
      "<!-- example: examples/a.ts#missing -->", "```ts", "```"
    ].join("\n")
    assert.deepStrictEqual(DocsExamples.renderDoc("doc.md", doc, load).problems, [
      "doc.md:1: a ```ts block needs a marker line before it, like <!-- example: examples/<file>.ts -->",
      "doc.md:4: an example marker must be followed, on the next line, by a ```ts block",
      "doc.md:7: examples/none.ts: no such file",
      "doc.md:10: examples/a.ts: no \"// #region missing\""
    ])
  })
})

describe("docs: links and words", () => {
  const docs = DocsExamples.docFiles()
  const anchor = (heading: string) =>
    heading.trim().toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, "").replace(/\s/g, "-")

  it("every relative link leads to a file of the repository (and a heading of it, when it names one)", () => {
    const broken: Array<string> = []
    for (const doc of docs) {
      const text = read(doc).replace(/```[\s\S]*?```/g, "")
      for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^[a-z]+:/.test(target!)) continue
        const [path, hash] = target!.split("#") as [string, string | undefined]
        const file = path === "" ? doc : normalize(join(dirname(doc), path))
        if (file.startsWith("..") || relative(root, join(root, file)).startsWith("..")) {
          broken.push(`${doc}: ${target} leaves the repository`)
          continue
        }
        let content: string
        try {
          content = read(file)
        } catch {
          broken.push(`${doc}: ${target}: no such file`)
          continue
        }
        if (hash !== undefined && file.endsWith(".md")) {
          const anchors = [...content.matchAll(/^#+ (.*)$/gm)].map((m) => anchor(m[1]!))
          if (!anchors.includes(hash)) broken.push(`${doc}: ${target}: no such heading`)
        }
      }
    }
    assert.deepStrictEqual(broken, [])
  })

  it("design.md has every section the code and the tests cite as (design: <Section>)", () => {
    const headings = new Set([...read("docs/design.md").matchAll(/^## (.*)$/gm)].map((m) => m[1]!))
    const missing: Array<string> = []
    let citations = 0
    for (const file of [...walk("src"), ...walk("test")]) {
      for (const match of read(file).matchAll(/\(design: ([^);]*)[);]/g)) {
        // A citation may wrap onto the next comment line.
        const names = match[1]!.replace(/\s*\n\s*(\*|\/\/)?\s*/g, " ")
        for (const section of names.split(",").map((name) => name.trim())) {
          citations++
          if (!headings.has(section)) missing.push(`${file}: ${section}`)
        }
      }
    }
    assert.isAbove(citations, 100)
    assert.deepStrictEqual(missing.filter((m) => !m.startsWith("test/docs.test.ts")), [])
  })

  it("every file and symbol design.md names exists: a file it cites, a symbol beside its file, a module's member", () => {
    const design = read("docs/design.md").replace(/```[\s\S]*?```/g, "")
    const sources = walk("src")
    // A cited file: a path under src/ as written, else a file of that name (or path's end) anywhere under src/.
    const fileOf = (cited: string): string | undefined =>
      sources.find((file) => file === `src/${cited}` || file === cited || file.endsWith(`/${cited}`))
    const has = (file: string, symbol: string) => new RegExp(`\\b${symbol.replace(/\$/g, "\\$")}\\b`).test(read(file))
    const problems: Array<string> = []
    let checked = 0
    for (const [, cited] of design.matchAll(/`([\w./-]+\.ts)`/g)) {
      if (cited!.startsWith("test/") || cited!.startsWith("examples/") || cited === "vitest.config.ts") continue
      checked++
      if (fileOf(cited!) === undefined) problems.push(`no file ${cited}`)
    }
    // "(`file.ts`, `symbol`, `symbol`)": the symbols listed right after a file are in that file (a bare
    // file name that several files share names none of them).
    for (const [, cited, list] of design.matchAll(/\(`([\w./-]+\.ts)`((?:, `[^`]+`)+)[);]/g)) {
      const matches = sources.filter((file) => file === `src/${cited}` || file === cited || file.endsWith(`/${cited}`))
      if (matches.length !== 1) continue
      for (const [, token] of list!.matchAll(/`([^`]+)`/g)) {
        const symbol = /^(?:\w+\.)?(\w+)(?:\(.*\))?$/.exec(token!)?.[1]
        if (symbol === undefined) continue
        checked++
        if (!has(matches[0]!, symbol)) problems.push(`${symbol} is not in ${matches[0]}`)
      }
    }
    // "`Module.member`" of a public module: the member is in the module (or in what it re-exports from).
    for (const [, module, member] of design.matchAll(/`([A-Z]\w+)\.([a-zA-Z]\w*)(?:\([^`]*\))?`/g)) {
      if (member === "ts") continue
      const file = sources.find((f) => f === `src/${module}.ts`)
      if (file === undefined) continue
      checked++
      const reexported = [...read(file).matchAll(/from "\.\/([\w./]+)\.js"/g)].map((m) => `src/${m[1]}.ts`)
      if (![file, ...reexported].some((f) => sources.includes(f) && has(f, member!))) {
        problems.push(`${module}.${member} is not in ${file}`)
      }
    }
    assert.isAbove(checked, 150)
    assert.deepStrictEqual(problems, [])
  })

  it("no contract section numbers or tracker references: the docs, the code and the tests say what they mean", () => {
    const cited: Array<string> = []
    const files = [
      ...docs,
      ...readdirSync(join(root, "examples"), { recursive: true, withFileTypes: true }).filter((entry) => entry.isFile())
        .map((entry) => `${relative(root, entry.parentPath)}/${entry.name}`),
      ...walk("src"),
      // This file holds the patterns themselves.
      ...walk("test").filter((file) => file !== "test/docs.test.ts")
    ]
    for (const file of files) {
      read(file).split("\n").forEach((line, i) => {
        // Amazon's S3 is a service's name, not a section.
        const text = line.replace(/other than S3\b/g, "")
        if (/\bS[0-9]{1,2}\b|DESIGN|[Ii]ssue [0-9]+/.test(text)) cited.push(`${file}:${i + 1}: ${line.trim()}`)
      })
    }
    assert.isAbove(files.length, 200)
    assert.deepStrictEqual(cited, [])
  })

  it("the README stays short: under 8 KB", () => {
    assert.isBelow(Buffer.byteLength(read("README.md")), 8192)
  })
})

describe("docs: the examples run", () => {
  it.effect("quickstart: the agent calls get_weather and answers from its result", () =>
    Effect.gen(function*() {
      const result = yield* Quickstart.main
      assert.strictEqual(result.output, "Lyon: 21 C")
      assert.deepStrictEqual(result.toolCalls[0]!.result.value, { city: "Lyon", celsius: 21 })
      assert.strictEqual(result.steps, 2)
    }))

  it.effect("tools: a call gives the encoded order; a NotFound is permanent, answered at once", () =>
    Effect.gen(function*() {
      const found = yield* ToolsExample.main("ord-4821")
      assert.deepStrictEqual(found.toolkit.definitions.map((d) => d.name), ["lookup_order", "issue_refund"])
      assert.strictEqual(found.result.success, true)
      assert.deepInclude(found.result.value as object, { id: "ord-4821", status: "paid" })
      const missing = yield* ToolsExample.main("ord-0")
      assert.strictEqual(missing.result.error, "NotFound: no order with id=ord-0")
      // The parameters a model sees: strict objects, the optional field left out of `required`.
      const { parameters } = Tool.jsonSchema(ToolsExample.lookupOrder)
      assert.deepInclude(parameters as object, { type: "object", required: ["order_id"], additionalProperties: false })
      // docs/tools.md shows them, the default included, as they are.
      const shown = /```json\n([\s\S]*?)```/.exec(read("docs/tools.md"))?.[1]
      assert.deepStrictEqual(JSON.parse(shown ?? "null"), parameters)
    }).pipe(Effect.provide(Shop.layer)))

  it.effect("tools: a tool from JSON Schemas answers a call that fits, and names what does not", () =>
    Effect.gen(function*() {
      const sunny = yield* Invocation.run(ToolsExample.forecast, { city: "Lyon" })
      assert.deepStrictEqual(sunny.value, { summary: "sunny in Lyon" })
      const bad = yield* Invocation.run(ToolsExample.forecast, { city: "Lyon", days: 0 })
      assert.match(bad.error ?? "", /^forecast: invalid input: days: /)
    }))

  it.effect("handler shapes: a plain function's value, through the whole pipeline", () =>
    Effect.gen(function*() {
      const result = yield* Invocation.run(HandlerShapesExample.vat, { amount: 100 })
      assert.strictEqual(result.value, 20)
      const bad = yield* Invocation.run(HandlerShapesExample.vat, { amount: "100" })
      assert.strictEqual(bad.error, "vat: invalid input: amount: Expected number, actual \"100\"")
    }))

  it.effect("hooks: the redacting hook rewrites the result the caller gets", () =>
    Effect.gen(function*() {
      const customer = Tool.make("lookup_customer", {
        description: "A customer.",
        input: { id: Schema.String },
        output: Schema.Struct({ id: Schema.String, ssn: Schema.String }),
        timeout: "1 second"
      }, ({ id }) => Effect.succeed({ id, ssn: "123-45-6789" }))
      const result = yield* Invocation.run(customer, { id: "cus-1" }).pipe(Effect.provide(HooksExample.hooks))
      assert.deepStrictEqual(result.value, { id: "cus-1", ssn: "***" })
      const bare = yield* Invocation.run(customer, { id: "cus-1" }).pipe(Effect.provide(Hooks.layer({ tool: [] })))
      assert.deepStrictEqual(bare.value, { id: "cus-1", ssn: "123-45-6789" })
    }))

  it.effect("agents: the same refund asked twice in one turn is made once, the second reused", () =>
    Effect.gen(function*() {
      const { refunds, result } = yield* AgentsExample.main("Refund the duplicate charge of ord-4821")
      assert.strictEqual(result.output, "Refunded; 3 results read.")
      assert.deepStrictEqual(result.toolCalls.map((c) => [c.name, c.cached]), [
        ["lookup_order", false],
        ["issue_refund", false],
        ["issue_refund", true]
      ])
      assert.strictEqual(refunds.length, 1)
      const requests = yield* Effect.flatMap(LanguageModel.Scripted, (scripted) => scripted.requests)
      assert.strictEqual(requests.length, 2)
    }).pipe(Effect.provide(AgentsExample.model)))

  it.effect("agents: each run on a scripted model of its own starts at the script's first turn; its requests are its own", () =>
    Effect.gen(function*() {
      const first = yield* AgentsExample.onItsOwnModel("Any refund for ord-4821?")
      const second = yield* AgentsExample.onItsOwnModel("And for ord-4822?")
      // A model shared by the two runs would have failed the second: its script has one turn.
      assert.deepStrictEqual([first.output, second.output], ["Nothing to refund.", "Nothing to refund."])
      assert.deepStrictEqual(second.requests.map((r) => r.messages[0]), [{ _tag: "UserMessage", text: "And for ord-4822?" }])
    }))

  it.scoped("agents: the durable run suspends on the refund, is approved and resumed; the refund is made once", () =>
    Effect.gen(function*() {
      const dir = yield* Effect.acquireRelease(
        Effect.sync(() => mkdtempSync(join(tmpdir(), "agent-tools-docs-"))),
        (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
      )
      const { output, pending, refunds } = yield* DurableRunsExample.main(join(dir, "runs.sqlite"))
      assert.deepStrictEqual(pending.map((p) => [p.toolCallId, p.toolName, p.input]), [
        ["c2", "issue_refund", { amount: 49.9, order_id: "ord-4821" }]
      ])
      assert.strictEqual(refunds.length, 1)
      assert.include(output, "\"amount\":49.9")
    }))

  it.effect("agents: billing's refund in a sub-agent suspends the tree, is approved from the root (b1/r1) and made once", () =>
    Effect.gen(function*() {
      const { output, pending, refunds } = yield* SubAgentsExample.main
      assert.deepStrictEqual(pending.map((p) => [p.toolCallId, p.toolName, p.path.map((hop) => hop.runId)]), [
        ["b1/r1", "issue_refund", ["ticket-7", "ticket-7/b1"]]
      ])
      assert.strictEqual(refunds.length, 1)
      assert.match(output, /^support: "billing: .*amount.*49\.9/)
    }))

  it.effect("configuration: a program's own log level, for one effect, for all of it, or from LOG_LEVEL", () =>
    Effect.gen(function*() {
      const lines: Array<string> = []
      const capture = Logger.add(Logger.make(({ logLevel, message }) => {
        lines.push(`${logLevel.label} ${Array.isArray(message) ? message.join(" ") : String(message)}`)
      }))
      const logged = <A, E>(effect: Effect.Effect<A, E>, layer: Layer.Layer<never, unknown> = Layer.empty) =>
        Effect.suspend(() => {
          lines.length = 0
          return effect.pipe(Effect.provide(Layer.merge(capture, layer)), Effect.map(() => [...lines]))
        })
      const each = Effect.all([Effect.logDebug("debug"), Effect.logInfo("info"), Effect.logWarning("warning")])
      assert.deepStrictEqual(yield* logged(LoggingExample.verbose), ["DEBUG looking up ord-1"])
      assert.deepStrictEqual(yield* logged(each), ["INFO info", "WARN warning"])
      assert.deepStrictEqual(yield* logged(each, LoggingExample.quiet), ["WARN warning"])
      const env = (vars: Record<string, string>) =>
        Layer.provide(LoggingExample.fromEnv, Layer.setConfigProvider(ConfigProvider.fromJson(vars)))
      const all = ["DEBUG debug", "INFO info", "WARN warning"]
      assert.deepStrictEqual(yield* logged(each, env({ LOG_LEVEL: "debug" })), all)
      assert.deepStrictEqual(yield* logged(each, env({ LOG_LEVEL: "ERROR" })), [])
      assert.deepStrictEqual(yield* logged(each, env({})), ["INFO info", "WARN warning"])
    }))

  it("agents: the run from outside Effect", async () => {
    const result = await AgentsExample.outsideEffect("Refund the duplicate charge of ord-4821")
    assert.strictEqual(result.steps, 2)
  })
})

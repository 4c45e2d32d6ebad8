/**
 * The structure of `src/` (design: Modules): the serving side never imports the platform's folder, every
 * face reaches the pipeline through the one door (design: The call pipeline), no module imports itself back
 * through others, and no function is over 100 lines. Read by the
 * TypeScript parser (test/support/imports.ts); `npx tsx scripts/structure.ts` prints the same.
 */
import { assert, describe, it } from "@effect/vitest"
import { readFileSync } from "node:fs"
import * as Door from "../src/internal/call/door.js"
import * as Pipeline from "../src/internal/call/pipeline.js"
import { cyclesOf, functionsOf, importGraph, importsOf, modulesUnder, namesTakenFrom } from "./support/imports.js"

const modules = modulesUnder("src")

/** The faces' own modules (MCP, serving): the platform reaches none of them. */
const isFaceInternal = (module: string): boolean =>
  module.startsWith("src/internal/mcp/") || module.startsWith("src/internal/serve/") ||
  ["src/Mcp.ts", "src/McpClient.ts", "src/Serve.ts"].includes(module)

/** The one door every face reaches the pipeline through (design: The call pipeline). */
const door = "src/internal/call/door.ts"
const pipeline = "src/internal/call/pipeline.ts"

/** What starts or awaits a call of the pipeline (and `*`: what may be anything of it). */
const startsCalls = new Set(["start", "awaitStarted", "CallingFiber", "*"])

/** Modules that may import `src/platform/`: its own, the CLI that composes everything, and the platform's entry. */
const mayImportPlatform = (module: string): boolean =>
  module.startsWith("src/platform/") || module === "src/main.ts" || module === "src/exports/platform.ts"

describe("the structure of src/", () => {
  it("no module outside src/platform/ (but main.ts and the platform's entry) imports one under it", () => {
    const offenders = modules.filter((module) => !mayImportPlatform(module)).flatMap((module) =>
      importsOf(module)
        .filter(({ target }) => target?.startsWith("src/platform/") === true)
        .map(({ kind, line, specifier }) => `${module}:${line} imports ${specifier} (${kind})`)
    )
    assert.deepStrictEqual(offenders, [], `imports of src/platform/ from outside it:\n${offenders.join("\n")}`)
  })

  it("nothing under src/platform/ imports a face's own modules (MCP's, serving's)", () => {
    const offenders = modules.filter((module) => module.startsWith("src/platform/")).flatMap((module) =>
      importsOf(module)
        .filter(({ target }) => target !== undefined && isFaceInternal(target))
        .map(({ kind, line, specifier }) => `${module}:${line} imports ${specifier} (${kind})`)
    )
    assert.deepStrictEqual(offenders, [], `a face's modules imported by the platform:\n${offenders.join("\n")}`)
  })

  it("no tool is made by spreading another (a tool with other schemas is Tool.fromJsonSchema's)", () => {
    // Toolkit.provide's copies keep every field of their tool, the handler wrapping the tool's own.
    const offenders = modules.filter((module) => module !== "src/Tool.ts" && module !== "src/Toolkit.ts").flatMap((module) =>
      readFileSync(module, "utf8").split("\n").flatMap((text, i) =>
        /\.\.\.\s*\w+\s*,\s*(schemas|input|output|handler)\s*:|\bschemas\s*:\s*Either\./.test(text) ? [`${module}:${i + 1}: ${text.trim()}`] : []
      )
    )
    assert.deepStrictEqual(offenders, [], `tools made by spreading one:\n${offenders.join("\n")}`)
  })

  it("the root entry (src/index.ts) loads none of the heavy packages: they come through their own entries, or load where used", () => {
    const heavy = /^(@modelcontextprotocol\/|ws$|pg$|better-sqlite3$|@effect\/sql-(pg|sqlite-node)|@effect\/cluster|@effect\/ai|@effect\/opentelemetry|@effect\/rpc|ajv)/
    const reached = new Map<string, string>()
    const seen = new Set<string>()
    const walk = (module: string, path: string): void => {
      if (seen.has(module)) return
      seen.add(module)
      for (const { kind, specifier, target } of importsOf(module)) {
        // Loaded at run time only (`import()`), or types: not loaded with the entry.
        if (kind === "dynamic" || kind === "type") continue
        if (target !== undefined) walk(target, `${path} -> ${target}`)
        else if (heavy.test(specifier) && !reached.has(specifier)) reached.set(specifier, path)
      }
    }
    walk("src/index.ts", "src/index.ts")
    const found = [...reached].map(([specifier, path]) => `${specifier}: ${path}`)
    assert.deepStrictEqual(found, [], `the root loads:\n${found.join("\n")}`)
  })

  it("only the door starts calls: no module but it (and the pipeline's own) takes start, awaitStarted or CallingFiber from the pipeline", () => {
    // The faces (the agent loop, serving, MCP, the platform) call the door, which finds the tool, holds the run's
    // state and starts the call; `Invocation` may take the pipeline's configuration, never its way in.
    const offenders = modules.filter((module) => module !== door && !module.startsWith("src/internal/call/")).flatMap((module) =>
      namesTakenFrom(module, pipeline)
        .filter(({ name }) => startsCalls.has(name))
        .map(({ line, name }) => `${module}:${line} takes ${name} from the pipeline`)
    )
    assert.deepStrictEqual(offenders, [], `modules that start calls past the door:\n${offenders.join("\n")}`)
    // The door calls the pipeline's `start`, and hands it on to no one.
    assert.include(namesTakenFrom(door, pipeline).map(({ name }) => name), "start")
    assert.notInclude(Object.keys(Door), "start")
  })

  it("the faces' other duties are the door's too: no module but it prepares worker pools, makes a run's hook state or outcomes, or answers an unknown tool", () => {
    const prepares = modules.filter((module) => module !== door && !module.startsWith("src/internal/worker/")).flatMap((module) =>
      namesTakenFrom(module, "src/internal/worker/prepare.ts").map(({ line, name }) => `${module}:${line} takes ${name}`)
    )
    // Code, not comments: a comment may name what the door does.
    const repeats = modules.filter((module) => module !== door).flatMap((module) =>
      readFileSync(module, "utf8").split("\n").flatMap((text, i) =>
        !/^\s*(\*|\/\/|\/\*)/.test(text) && /\bnew\s+(\w+\.)?(RunState|Outcomes)\(|\bunknownTool\(/.test(text)
          ? [`${module}:${i + 1}: ${text.trim()}`]
          : []
      )
    )
    const offenders = [...prepares, ...repeats]
    assert.deepStrictEqual(offenders, [], `a face's duty done past the door:\n${offenders.join("\n")}`)
  })

  it("no import cycle among the modules of src/ (static, type-only and dynamic imports alike)", () => {
    const cycles = cyclesOf(importGraph(modules)).map((cycle) => cycle.join(" -> "))
    assert.deepStrictEqual(cycles, [], `import cycles:\n${cycles.join("\n")}`)
  })

  it("no file in src/ is over 600 lines: a room of one subject", () => {
    const offenders = modules.map((module) => ({ module, lines: readFileSync(module, "utf8").split("\n").length }))
      .filter(({ lines }) => lines > 600)
      .map(({ lines, module }) => `${module}: ${lines} lines`)
    assert.deepStrictEqual(offenders, [], `files over 600 lines:\n${offenders.join("\n")}`)
  })

  it("no function in src/ is over 100 lines", () => {
    const offenders = modules.flatMap(functionsOf).filter(({ lines }) => lines > 100)
      .sort((a, b) => b.lines - a.lines)
      .map(({ line, lines, module, name }) => `${module}:${line} ${name}: ${lines} lines`)
    assert.deepStrictEqual(offenders, [], `functions over 100 lines:\n${offenders.join("\n")}`)
  })

  it("the pipeline offers one way in, `start` (Invocation.run as an effect), and no stage: callers pass options", () => {
    // Values only: its limits, its observer, the caller's fiber, the argument and answer wrappers, the
    // entry and its await, and the output check the platform applies to a served answer.
    assert.deepStrictEqual(Object.keys(Pipeline).sort(), [
      "CallingFiber",
      "InvocationConfig",
      "InvocationObserver",
      "ParsedArguments",
      "Verbatim",
      "awaitStarted",
      "checkResult",
      "defaultConfig",
      "start"
    ])
  })
})

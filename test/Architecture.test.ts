/**
 * The structure of `src/` (design: Modules): the serving side never imports the platform's folder, no
 * module imports itself back through others, and no function is over 100 lines. Read by the
 * TypeScript parser (test/support/imports.ts); `npx tsx scripts/structure.ts` prints the same.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Pipeline from "../src/internal/call/pipeline.js"
import { cyclesOf, functionsOf, importGraph, importsOf, modulesUnder } from "./support/imports.js"

const modules = modulesUnder("src")

/** Modules that may import `src/platform/`: its own, and the two that compose everything. */
const mayImportPlatform = (module: string): boolean =>
  module.startsWith("src/platform/") || module === "src/main.ts" || module === "src/index.ts"

describe("the structure of src/", () => {
  it("no module outside src/platform/ (but main.ts and index.ts) imports one under it", () => {
    const offenders = modules.filter((module) => !mayImportPlatform(module)).flatMap((module) =>
      importsOf(module)
        .filter(({ target }) => target?.startsWith("src/platform/") === true)
        .map(({ kind, line, specifier }) => `${module}:${line} imports ${specifier} (${kind})`)
    )
    assert.deepStrictEqual(offenders, [], `imports of src/platform/ from outside it:\n${offenders.join("\n")}`)
  })

  it("no import cycle among the modules of src/ (static, type-only and dynamic imports alike)", () => {
    const cycles = cyclesOf(importGraph(modules)).map((cycle) => cycle.join(" -> "))
    assert.deepStrictEqual(cycles, [], `import cycles:\n${cycles.join("\n")}`)
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

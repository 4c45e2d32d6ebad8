/**
 * Prints the structure checks of test/Architecture.test.ts: the five longest functions in src/ with
 * their lengths, and every import cycle among its modules. `npx tsx scripts/structure.ts`.
 */
import { cyclesOf, functionsOf, importGraph, modulesUnder } from "../test/support/imports.js"

const modules = modulesUnder("src")
const longest = modules.flatMap(functionsOf).sort((a, b) => b.lines - a.lines).slice(0, 5)
console.log("The five longest functions in src/:")
for (const { line, lines, module, name } of longest) console.log(`  ${lines} lines  ${module}:${line} ${name}`)
const cycles = cyclesOf(importGraph(modules))
console.log(cycles.length === 0 ? "No import cycle in src/." : "Import cycles in src/:")
for (const cycle of cycles) console.log(`  ${cycle.join(" -> ")}`)

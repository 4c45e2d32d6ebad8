/**
 * `node --import` this before the official MCP conformance suite on Node 20: its bundle imports
 * `globSync` from `fs` by name (Node 22 has it), which no `--require` can add to a built-in's ESM
 * exports. A resolve hook gives that package, and only it, `fs` with a `globSync` (fs-shim.mjs).
 */
import { register } from "node:module"

register("./hooks.mjs", import.meta.url)

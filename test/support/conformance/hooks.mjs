/** The resolve hook of preload.mjs: `fs` for the conformance suite's bundle is fs-shim.mjs. */
const shim = new URL("./fs-shim.mjs", import.meta.url).href
export async function resolve(specifier, context, next) {
  if ((specifier === "fs" || specifier === "node:fs") && context.parentURL?.includes("@modelcontextprotocol/conformance")) {
    return { url: shim, shortCircuit: true }
  }
  return next(specifier, context)
}

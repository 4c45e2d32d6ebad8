/**
 * The console's pages (docs: console): the static files of the browser client at `/console`, each with a
 * Content-Security-Policy that lets the page run only its own script and style and talk only to this server
 * (no inline script, no other origin, no frame), `nosniff`, and no cookie. The client signs in with an operator
 * token and uses the operator API under `/api/v1` as any client does: the pages themselves need no token.
 * Shipped built in `dist/console` (scripts/build.mjs); run from the sources (tsx), made in memory by the same
 * bundler step (console/build.mjs) at start.
 */
import { Data, Effect } from "effect"
import { existsSync, readdirSync, readFileSync } from "node:fs"
import type { IncomingMessage, ServerResponse } from "node:http"
import { fileURLToPath } from "node:url"
import type { ConsoleOptions } from "../Options.js"
import { consolePrefix } from "./Listener.js"

/** What every answer of the console carries. */
export const securityHeaders = {
  "content-security-policy": "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; " +
    "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "cross-origin-opener-policy": "same-origin",
  "cross-origin-resource-policy": "same-origin",
  "cache-control": "no-cache"
} as const

const types: Record<string, string> = {
  "index.html": "text/html; charset=utf-8",
  "console.css": "text/css; charset=utf-8",
  "console.js": "text/javascript; charset=utf-8",
  "config.json": "application/json"
}

type Files = Record<string, Uint8Array>

/** The console's files could not be found or made: the platform does not start with `console` on. */
class ConsoleFilesMissing extends Data.TaggedError("ConsoleFilesMissing")<{ readonly message: string }> {}

/** The built files: `dist/console` beside the bundled CLI (`dist/cli`) or the library (`dist/lib/platform/api`). */
const builtFiles = (): Files | undefined => {
  for (const candidate of ["../console/", "../../../console/"]) {
    const folder = fileURLToPath(new URL(candidate, import.meta.url))
    if (!existsSync(`${folder}index.html`)) continue
    return Object.fromEntries(readdirSync(folder).map((name) => [name, readFileSync(`${folder}${name}`)]))
  }
  return undefined
}

let bundled: Promise<Files> | undefined

/** The files, built (the package) or made now from console/src (the sources, run by tsx). */
const loadFiles = Effect.tryPromise({
  try: async (): Promise<Files> => {
    if (!import.meta.url.endsWith(".ts")) {
      const built = builtFiles()
      if (built === undefined) throw "no dist/console beside the platform's modules: run npm run build"
      return built
    }
    // Not a literal: the bundled CLI never takes the bundler in (it reads dist/console). Made once a process.
    const script = new URL("../../../console/build.mjs", import.meta.url).href
    bundled ??= import(script).then((module: { bundleConsole: () => Promise<Files> }) => module.bundleConsole())
    return await bundled.catch((cause) => {
      bundled = undefined
      throw cause
    })
  },
  catch: (cause) =>
    new ConsoleFilesMissing({ message: `the console's files: ${cause instanceof Error ? cause.message : String(cause)}` })
})

/** A request's file: `/console` and any path of the client's own is its page; else the file named, if there is one. */
const fileOf = (url: string, files: Files): string | undefined => {
  const path = new URL(url, "http://console").pathname.slice(consolePrefix.length).replace(/^\/+/, "")
  if (path === "" || path === "index.html") return "index.html"
  return Object.hasOwn(files, path) ? path : undefined
}

/**
 * The console's request listener: GET and HEAD of its files; the settings the client reads as `config.json`.
 * Its files not to be found (a package built without them) is a defect saying how to build them.
 */
export const make = (settings: ConsoleOptions) =>
  Effect.gen(function*() {
    const files: Files = {
      ...yield* Effect.orDie(loadFiles),
      "config.json": Buffer.from(JSON.stringify({ traceUrl: settings.traceUrl ?? null }))
    }
    return (request: IncomingMessage, response: ServerResponse): void => {
      if (request.method !== "GET" && request.method !== "HEAD") {
        response.writeHead(405, { ...securityHeaders, allow: "GET, HEAD", "content-type": "text/plain" })
        return void response.end("the console's pages are read with GET\n")
      }
      const name = fileOf(request.url ?? consolePrefix, files)
      if (name === undefined) {
        response.writeHead(404, { ...securityHeaders, "content-type": "text/plain" })
        return void response.end("not a file of the console\n")
      }
      const body = files[name]!
      response.writeHead(200, {
        ...securityHeaders,
        "content-type": types[name] ?? "application/octet-stream",
        "content-length": body.byteLength
      })
      response.end(request.method === "HEAD" ? undefined : body)
    }
  })

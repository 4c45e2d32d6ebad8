// @ts-check
/**
 * The console's pages (docs: console) as the platform serves them: `index.html`, `console.css`, and
 * `console.js`, the client (console/src, TypeScript for the browser, no framework) bundled by esbuild. The one
 * way they are made: `scripts/build.mjs` writes them into `dist/console` for the package; a platform run from
 * its sources (tsx) makes them in memory when it starts with the console.
 */
import { readFileSync } from "node:fs"
import * as esbuild from "esbuild"

const here = new URL(".", import.meta.url)

/** @returns {Promise<Record<string, Uint8Array>>} each file's name and bytes */
export const bundleConsole = async () => {
  const result = await esbuild.build({
    absWorkingDir: new URL("..", here).pathname,
    entryPoints: ["console/src/main.ts"],
    bundle: true,
    minify: true,
    format: "esm",
    platform: "browser",
    target: "es2022",
    write: false,
    outfile: "console.js",
    legalComments: "none",
    logLevel: "warning"
  })
  const script = result.outputFiles.find((file) => file.path.endsWith("console.js"))
  if (script === undefined) throw new Error("esbuild made no console.js")
  return {
    "index.html": readFileSync(new URL("index.html", here)),
    "console.css": readFileSync(new URL("console.css", here)),
    "console.js": script.contents
  }
}

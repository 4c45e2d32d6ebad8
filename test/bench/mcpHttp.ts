/**
 * The MCP face over Streamable HTTP beside the SDK's own: the same `add` tool served by ours
 * (`Mcp.layerHttp` with a bearer token map and every default limit: Host and Origin checked, bodies
 * counted, sessions capped and expired) and by the SDK's `McpServer` on the SDK's Express app
 * (`createMcpExpressApp`, its Host check, a `StreamableHTTPServerTransport` a session answering JSON as
 * ours does), each in a child process of its own (test/bench/mcpServer.ts), driven by the official client
 * (`Client` over `StreamableHTTPClientTransport`, the token on every request to both) in this one.
 * Both are started and warmed, then measured taking turns, so that a busy machine slows both alike: one
 * session's sequential calls alternate between the two servers call by call (the median call's time),
 * and blocks of calls from 16 sessions at once, each calling one after another, alternate block by
 * block (the median block's calls/s; the median call's time over every block). Beside them, on Linux,
 * the CPU each server process used a call (user and system, from /proc).
 * Run with `npm run bench` or `npx tsx test/bench/mcpHttp.ts`.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { type ChildProcess, spawn } from "node:child_process"
import { readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { report } from "./report.js"

const arg = (name: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3)
const sequentialCalls = Number(arg("sequential") ?? 2_000) // each server's, alternating call by call
const sessions = 16
const blocks = Number(arg("blocks") ?? 8) // each server's, alternating block by block
const blockCalls = Number(arg("block-calls") ?? 1_500)
const token = "bench-token-0123456789abcdef"
/** `--profile=DIR`: each server writes a CPU profile there when it stops. */
const profile = arg("profile")
const servers = ["ours", "sdk"] as const
type ServerName = typeof servers[number]

const median = (xs: ReadonlyArray<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

/** utime + stime of a process, from /proc/<pid>/stat (clock ticks of 10 ms on Linux). */
const cpuMicros = (pid: number | undefined): number | undefined => {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ")
    return (Number(fields[11]) + Number(fields[12])) * 10_000
  } catch {
    return undefined
  }
}

interface Started {
  readonly child: ChildProcess
  readonly url: URL
  readonly cpu: () => number | undefined
}

/** `server` in a child process of its own, once it says it listens. */
const start = (server: ServerName): Promise<Started> =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [
      ...(profile === undefined ? [] : ["--cpu-prof", `--cpu-prof-dir=${profile}/${server}`]),
      "--import",
      "tsx",
      "test/bench/mcpServer.ts",
      `--server=${server}-http`,
      `--token=${token}`
    ], { cwd: fileURLToPath(new URL("../..", import.meta.url)), stdio: ["ignore", "pipe", "inherit"] })
    let out = ""
    child.stdout!.on("data", (chunk: Buffer) => {
      out += chunk.toString("utf8")
      const port = /listening (\d+)/.exec(out)?.[1]
      if (port !== undefined) {
        child.stdout!.removeAllListeners("data")
        child.stdout!.resume()
        resolve({ child, url: new URL(`http://127.0.0.1:${port}/mcp`), cpu: () => cpuMicros(child.pid) })
      }
    })
    child.once("exit", (code) => reject(new Error(`the ${server} server exited (${code}) before listening`)))
  })

const connect = async (url: URL): Promise<Client> => {
  const client = new Client({ name: "bench", version: "0.1.0" })
  await client.connect(new StreamableHTTPClientTransport(url, { requestInit: { headers: { authorization: `Bearer ${token}` } } }))
  return client
}

let n = 0
/** One call's microseconds. */
const call = async (client: Client): Promise<number> => {
  const a = n++
  const t0 = performance.now()
  const result = await client.callTool({ name: "add", arguments: { a, b: 1 } })
  const took = (performance.now() - t0) * 1000
  const sum = (result.structuredContent as { result?: unknown } | undefined)?.result
  if (result.isError === true || sum !== a + 1) throw new Error(`a wrong answer: ${JSON.stringify(result)}`)
  return took
}

/** `calls` calls from every session at once, each one after another: calls/s, and each call's time into `times`. */
const wide = async (clients: ReadonlyArray<Client>, calls: number, times: Array<number>): Promise<number> => {
  let left = calls
  const worker = async (client: Client) => {
    while (left > 0) {
      left--
      times.push(await call(client))
    }
  }
  const t0 = performance.now()
  await Promise.all(clients.map(worker))
  return calls / ((performance.now() - t0) / 1000)
}

/** The servers in the `i`th of their two orders. */
const turn = (i: number): ReadonlyArray<ServerName> => i % 2 === 0 ? servers : [...servers].reverse()

const main = async () => {
  const started = { ours: await start("ours"), sdk: await start("sdk") }
  const one = { ours: await connect(started.ours.url), sdk: await connect(started.sdk.url) }
  const many = {
    ours: await Promise.all(Array.from({ length: sessions }, () => connect(started.ours.url))),
    sdk: await Promise.all(Array.from({ length: sessions }, () => connect(started.sdk.url)))
  }
  for (const server of servers) {
    for (let i = 0; i < 500; i++) await call(one[server])
    await wide(many[server], 3_000, [])
  }
  const cpuNow = () => ({ ours: started.ours.cpu(), sdk: started.sdk.cpu() })
  const times = { ours: [] as Array<number>, sdk: [] as Array<number> }
  const seqStart = cpuNow()
  for (let i = 0; i < sequentialCalls; i++) {
    for (const server of turn(i)) times[server].push(await call(one[server]))
  }
  const seqEnd = cpuNow()
  const rates = { ours: [] as Array<number>, sdk: [] as Array<number> }
  const wideTimes = { ours: [] as Array<number>, sdk: [] as Array<number> }
  const wideCpu = { ours: 0, sdk: 0 }
  for (let block = 0; block < blocks; block++) {
    for (const server of turn(block)) {
      const before = started[server].cpu()
      rates[server].push(await wide(many[server], blockCalls, wideTimes[server]))
      wideCpu[server] += (started[server].cpu() ?? 0) - (before ?? 0)
    }
  }
  await Promise.all(servers.flatMap((server) => [one[server], ...many[server]].map((client) => client.close())))
  await Promise.all(servers.map((server) =>
    new Promise((resolve) => {
      started[server].child.once("exit", resolve)
      started[server].child.kill()
    })
  ))
  const figures = (server: ServerName) => {
    const s = seqStart[server]
    const e = seqEnd[server]
    return {
      sequential: median(times[server]),
      sequentialRate: 1e6 / (times[server].reduce((a, b) => a + b, 0) / times[server].length),
      callsPerSecond: median(rates[server]),
      wideP50: median(wideTimes[server]),
      cpu: s === undefined || e === undefined
        ? undefined
        : { sequential: (e - s) / sequentialCalls, wide: wideCpu[server] / (blocks * blockCalls) }
    }
  }
  const ours = figures("ours")
  const sdk = figures("sdk")
  if (process.env.BENCH_JSON !== "1") {
    for (const server of servers) {
      const f = figures(server)
      const cpu = f.cpu === undefined ? "" : `; server CPU ${f.cpu.sequential.toFixed(0)} and ${f.cpu.wide.toFixed(0)} us/call`
      console.log(
        `${server}: one session p50 ${f.sequential.toFixed(0)} us (${f.sequentialRate.toFixed(0)} calls/s); ` +
          `${sessions} sessions p50 ${f.wideP50.toFixed(0)} us, blocks of ${blockCalls}: ` +
          `${rates[server].map((r) => r.toFixed(0)).join(", ")} calls/s${cpu}`
      )
    }
  }
  const sdkName = "the SDK's McpServer on its Express app"
  report({
    bench: "mcp-http",
    measure: `add over Streamable HTTP, official client, ${sessions} sessions at once: calls/s, median of ${blocks} blocks of ${blockCalls}; p50`,
    value: `${ours.callsPerSecond.toFixed(0)} calls/s; ${(ours.wideP50 / 1000).toFixed(1)} ms`,
    baseline: `${sdk.callsPerSecond.toFixed(0)} calls/s; ${(sdk.wideP50 / 1000).toFixed(1)} ms (${sdkName})`,
    ratio: `${(ours.callsPerSecond / sdk.callsPerSecond).toFixed(2)}x; ${(ours.wideP50 / sdk.wideP50).toFixed(2)}x`,
    target: ">= 1x the SDK's calls/s"
  })
  report({
    bench: "mcp-http",
    measure: `same, one session, sequential: p50 of ${sequentialCalls} calls alternating with the SDK's; calls/s`,
    value: `${ours.sequential.toFixed(0)} us; ${ours.sequentialRate.toFixed(0)} calls/s`,
    baseline: `${sdk.sequential.toFixed(0)} us; ${sdk.sequentialRate.toFixed(0)} calls/s (${sdkName})`,
    ratio: `${(ours.sequential / sdk.sequential).toFixed(2)}x; ${(ours.sequentialRate / sdk.sequentialRate).toFixed(2)}x`,
    target: "p50 <= 1.1x the SDK's"
  })
  if (ours.cpu !== undefined && sdk.cpu !== undefined) {
    report({
      bench: "mcp-http",
      measure: `the server process's CPU a call (user + system): one session; ${sessions} sessions`,
      value: `${ours.cpu.sequential.toFixed(0)}; ${ours.cpu.wide.toFixed(0)} us/call`,
      baseline: `${sdk.cpu.sequential.toFixed(0)}; ${sdk.cpu.wide.toFixed(0)} us/call (${sdkName})`,
      ratio: `${(ours.cpu.sequential / sdk.cpu.sequential).toFixed(2)}x; ${(ours.cpu.wide / sdk.cpu.wide).toFixed(2)}x`
    })
  }
}

main().then(() => process.exit(0), (error) => {
  console.error(error)
  process.exit(1)
})

import { assert, describe, it } from "@effect/vitest"
import { type ChildProcess, execFile, spawn } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { connect, createServer } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { Chunk, Effect, Layer, Logger, LogLevel, Schedule, Schema, Stream } from "effect"
import { LanguageModel, Timing, Tool, Toolkit } from "../src/index.js"
import { PlatformServer } from "../src/exports/platform.js"
import { Serve } from "../src/exports/serve.js"
import { clientLayer, resultsText } from "./support/platform.js"

const root = fileURLToPath(new URL("..", import.meta.url))

/** Runs `tsx src/main.ts ...args` to its end (stdout not a TTY), with the keys of real models unset. */
const main = (args: ReadonlyArray<string>, extraEnv: Record<string, string> = {}) =>
  new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    const env = { ...process.env, ANTHROPIC_API_KEY: "", OPENAI_API_KEY: "", OPENAI_BASE_URL: "", ...extraEnv }
    execFile(process.execPath, ["--import", "tsx", "src/main.ts", ...args], { cwd: root, env, timeout: 60_000 }, (error, stdout, stderr) =>
      resolve({ code: error === null ? 0 : (error as { code?: number }).code ?? 1, stdout, stderr }))
  })

describe("main: the demo", () => {
  it("runs end to end: the refund ran once although requested twice, after one retry", async () => {
    const { code, stderr, stdout } = await main([])
    assert.strictEqual(code, 0)
    assert.notInclude(stdout, "\x1b", "no escape codes when stdout is not a terminal")
    assert.include(stdout, "model: scripted (no ANTHROPIC_API_KEY or OPENAI_API_KEY")
    assert.include(
      stdout,
      "answer: Order ord-4821 for Ada Moreau was charged twice. I refunded the duplicate charge: refund re-1 of 59.9 (refunds made 1)."
    )
    assert.match(stdout, /model turns\s+3\n/)
    assert.match(stdout, /tool calls\s+4\n/)
    assert.match(stdout, /reused\s+1\n/)
    assert.match(stdout, /retries\s+1\n/)
    assert.match(stdout, /refunds made\s+1 \(issue_refund requested 2 times\)\n/)
    // The refund waits for approval (the task suspends), the demo's code approves it and says so, the task goes on.
    assert.include(stdout, "⏸ task waits for approval of issue_refund {\"amount\":59.9,\"order_id\":\"ord-4821\"} (call-refund-1)")
    assert.include(stdout, "✔ issue_refund (call-refund-1) approved by the demo's code, not a person: this demo is not interactive")
    assert.include(stdout, "model turn 2 replayed from the journal (the model is not asked again)")
    assert.isBelow(stdout.indexOf("approved by the demo's code"), stdout.indexOf("✓ issue_refund (call-refund-1)"))
    // One tool comes from an MCP server the demo started itself, and the model's call of it worked (the customer's name).
    assert.match(stdout, /lookup_customer comes from an MCP server this demo started, at http:\/\/127\.0\.0\.1:\d+\/mcp/)
    assert.match(stdout, /✓ lookup_customer \(call-customer\)/)
    assert.include(stdout, "deregistered from the platform")
    // Agents that call agents: the support agent asked the billing agent, which looked the order up.
    assert.include(stdout, "sub-agent: support asked billing, an agent it has as a tool (Agent.asTool): Billing says: order ord-4821 was charged 119.80 in total.")
    // One ordered view: the log lines are in it, each call's after the call's line, not on stderr.
    const at = (pattern: RegExp) => {
      const index = stdout.split("\n").findIndex((line) => pattern.test(line))
      assert.isAtLeast(index, 0, `${pattern} in\n${stdout}`)
      return index
    }
    const order = [
      at(/INFO agent demo-agent: registered 7 tool\(s\)/),
      at(/serving 7 tools for demo-agent/),
      at(/task \S+ submitted$/),
      at(/→ lookup_order /),
      at(/INFO tool call .*tool=lookup_order/),
      at(/✓ lookup_order \(call-order\)/),
      at(/→ issue_refund /),
      at(/⟳ issue_refund failed/),
      at(/INFO tool call .*toolCallId=call-refund-1 .*tool=issue_refund/),
      at(/✓ issue_refund \(call-refund-1\)/),
      at(/task completed$/)
    ]
    assert.deepStrictEqual(order, [...order].sort((a, b) => a - b), stdout)
    assert.notInclude(stderr, "tool call")
  }, 60_000)

  it("--json prints the same events as NDJSON", async () => {
    const { code, stdout } = await main(["--json"])
    assert.strictEqual(code, 0)
    const events = stdout.trim().split("\n").map((line) => JSON.parse(line) as { kind: string; [k: string]: unknown })
    const kinds = events.map((e) => e.kind)
    assert.deepStrictEqual(kinds.filter((k) => k === "turn").length, 3)
    assert.deepStrictEqual(kinds.filter((k) => k === "call_started").length, 3)
    assert.deepStrictEqual(kinds.filter((k) => k === "call_finished").length, 4)
    assert.deepStrictEqual(kinds.filter((k) => k === "retry").length, 1)
    const summary = events.find((e) => e.kind === "summary")!
    assert.deepStrictEqual([summary.reused, summary.retries, summary.toolCalls], [1, 1, 4])
    assert.include(String(events.find((e) => e.kind === "task_completed")?.output), "refund re-1")
  }, 60_000)
})

describe("main: the CLI", () => {
  it("--help describes the commands, and each command's --help its options", async () => {
    const top = await main(["--help"])
    assert.strictEqual(top.code, 0)
    for (const command of ["demo", "platform", "serve", "mcp", "run", "approve", "submit", "tasks list", "approvals deny", "agents"]) {
      assert.include(top.stdout, command)
    }
    const platform = await main(["platform", "--help"])
    assert.strictEqual(platform.code, 0)
    for (const option of ["--port", "--host", "--tokens", "--journal", "--model"]) assert.include(platform.stdout, option)
    // --placement's sentences, each its own.
    assert.include(
      platform.stdout.replace(/\s+/g, " "),
      "where a new task runs. submitter: on the runner its serving process is connected to. id: spread over the runners by its id."
    )
    const mcp = await main(["mcp", "--help"])
    assert.include(mcp.stdout, "--http")
  }, 60_000)

  it("--help: each option its description and default, none of @effect/cli's filler, no colour into a pipe", async () => {
    const helps = await Promise.all([[], ["platform"], ["serve"], ["mcp"], ["run"], ["approve"]].map((command) =>
      main([...command, "--help"])
    ))
    for (const help of helps) {
      assert.strictEqual(help.code, 0, help.stderr)
      assert.notInclude(help.stdout, "\x1b", "no escape codes when stdout is not a terminal")
      for (const filler of ["A user-defined piece of text.", "A true or false value.", "An integer.", "This setting is optional", "--wizard", "--completions"]) {
        assert.notInclude(help.stdout, filler)
      }
      assert.include(help.stdout, "--version prints the version")
    }
    const [top, platform, serve, mcp, run] = helps
    // The commands by name and description, not by their whole usage padded to the longest.
    assert.match(top!.stdout, /\n {2}- platform {2,}Run the platform alone/)
    assert.match(top!.stdout, /\n {2}- platform migrate {2,}Cluster mode: create the schema on the database/)
    assert.match(top!.stdout, /\n {2}- approvals approve {2,}Approve a call a task waits for/)
    assert.notInclude(top!.stdout, "[--runner-port integer] migrate")
    assert.include(platform!.stdout, "$ agent-tools platform [--port integer] [--host text]")
    assert.include(platform!.stdout, "--port integer\n\n  the port to listen on, 0 for any free one (default: 8787)")
    assert.include(platform!.stdout, "--host text\n\n  the address to bind (default: 127.0.0.1)")
    assert.include(platform!.stdout, "cluster mode: the port runners talk to each other on (default: 34431)")
    assert.include(serve!.stdout, "before they are interrupted (default: 30)")
    assert.include(mcp!.stdout, "the HTTP port (with --http) (default: 8788)")
    assert.include(run!.stdout, "<prompt>\n\n  what to ask the agent")
  }, 60_000)

  it("a bad command line says what is wrong, then the usage; exit 2", async () => {
    const [bogus, platformBogus, unknown, badFlag, extra, missing] = await Promise.all([
      main(["--bogus"]),
      main(["platform", "--bogus", "--port", "1"]),
      main(["deploy"]),
      main(["platform", "--port", "not-a-number"]),
      main(["serve", "extra"]),
      main(["run"])
    ])
    for (const bad of [bogus, platformBogus, unknown, badFlag, extra, missing]) {
      assert.strictEqual(bad.code, 2, bad.stderr)
      assert.strictEqual(bad.stdout, "")
      assert.notInclude(bad.stderr, "_tag")
    }
    assert.strictEqual(
      bogus.stderr,
      "agent-tools: unknown option --bogus\n\nusage: agent-tools [--model text] [--json] [<command>]\n\n" +
        "agent-tools --help describes the commands\n"
    )
    assert.match(platformBogus.stderr, /^agent-tools: unknown option --bogus\n\nusage: agent-tools platform \[--port integer\] /)
    assert.include(platformBogus.stderr, "agent-tools platform --help describes its options")
    assert.include(unknown.stderr, "agent-tools: Invalid subcommand for agent-tools - use one of 'demo', 'platform', 'serve', 'mcp', 'run', 'approve', 'submit', 'tasks', 'approvals', 'agents'\n\nusage: agent-tools [--model text]")
    assert.include(badFlag.stderr, "agent-tools: 'not-a-number' is not an integer\n\nusage: agent-tools platform [--port integer]")
    assert.include(extra.stderr, "agent-tools: unexpected argument 'extra'\n\nusage: agent-tools serve [--grace integer]")
    assert.include(missing.stderr, "agent-tools: Missing argument <prompt>\n\nusage: agent-tools run [--model text] <prompt>")
  }, 60_000)

  it("a port out of range is a bad command line, before anything starts: exit 2, no listening", async () => {
    const [platform, runner, mcp] = await Promise.all([
      main(["platform", "--port", "99999"], { PLATFORM_TOKENS: "tok:agent" }),
      main(["platform", "--runner-port", "-1"], { PLATFORM_TOKENS: "tok:agent" }),
      main(["mcp", "--http", "--port", "65536"])
    ])
    for (const bad of [platform, runner, mcp]) {
      assert.strictEqual(bad.code, 2, bad.stderr)
      assert.notInclude(bad.stderr, "platform on")
      assert.notInclude(bad.stderr, "RangeError")
    }
    assert.match(platform.stderr, /^agent-tools: --port must be a port number from 0 to 65535, not 99999\n\nusage: agent-tools platform /)
    assert.include(runner.stderr, "agent-tools: --runner-port must be a port number from 0 to 65535, not -1")
    assert.match(mcp.stderr, /^agent-tools: --port must be a port number from 0 to 65535, not 65536\n\nusage: agent-tools mcp /)
  }, 60_000)
})

describe("main: the bundled CLI (scripts/build.mjs --cli)", () => {
  it("prints no colour into a pipe: --help, --version, a bad command line", async () => {
    await new Promise<void>((resolve, reject) =>
      execFile(process.execPath, ["scripts/build.mjs", "--cli"], { cwd: root, timeout: 60_000 }, (error, _, stderr) =>
        error === null ? resolve() : reject(new Error(`${error.message}\n${stderr}`))))
    const bin = (args: ReadonlyArray<string>) =>
      new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) =>
        execFile(process.execPath, ["dist/cli/agent-tools.mjs", ...args], { cwd: root, timeout: 30_000 }, (error, stdout, stderr) =>
          resolve({ code: error === null ? 0 : (error as { code?: number }).code ?? 1, stdout, stderr })))
    const [help, version, bogus] = await Promise.all([bin(["platform", "--help"]), bin(["--version"]), bin(["--bogus"])])
    assert.strictEqual(help.code, 0, help.stderr)
    assert.include(help.stdout, "USAGE")
    assert.include(help.stdout, "(default: 8787)")
    assert.strictEqual(version.stdout.trim(), "0.1.0")
    assert.strictEqual(bogus.code, 2)
    assert.include(bogus.stderr, "unknown option --bogus")
    for (const { stderr, stdout } of [help, version, bogus]) assert.notInclude(stdout + stderr, "\x1b")
  }, 90_000)
})

describe("main: run", () => {
  it("run asks before a refund; with no terminal to ask (stdin not a TTY) the refund is refused and not made", async () => {
    const { code, stdout } = await main(["run", "Refund the duplicate charge on ord-4821"])
    assert.strictEqual(code, 0)
    assert.include(stdout, "stdin is not a terminal: no one can approve a refund here, so one is refused")
    assert.include(stdout, "✓ lookup_order {\"order_id\":\"ord-4821\"}")
    assert.include(stdout, "✗ issue_refund {\"order_id\":\"ord-4821\",\"amount\":59.9}")
    assert.notInclude(stdout, "✓ issue_refund")
    assert.include(stdout, "answer: I could not refund order ord-4821: issue_refund: needs approval, and no user is available to give it.")
    // The counts, plural only for many.
    const counts = /\((\d+) model turn(s?), (\d+) tool call(s?)\)/.exec(stdout)
    assert.isNotNull(counts, stdout)
    assert.strictEqual(counts![2] === "s", counts![1] !== "1")
    assert.strictEqual(counts![4] === "s", counts![3] !== "1")
  }, 60_000)
})

describe("main: fatal errors and secrets (design: Hostile clients)", () => {
  const unset = { AGENT_ID: "", PLATFORM_TOKEN: "", PLATFORM_URL: "", PLATFORM_TOKENS: "", LOG_LEVEL: "" }

  it("a fatal error is one line on stderr naming every missing setting, exit 1; the stack only at LOG_LEVEL=debug", async () => {
    const plain = await main(["serve"], unset)
    assert.strictEqual(plain.code, 1)
    assert.strictEqual(plain.stdout, "")
    assert.strictEqual(plain.stderr, "agent-tools: MissingSetting: AGENT_ID, PLATFORM_TOKEN, PLATFORM_URL are not set\n")
    const debug = await main(["serve"], { ...unset, AGENT_ID: "a", LOG_LEVEL: "debug" })
    assert.strictEqual(debug.code, 1)
    assert.include(debug.stderr, "agent-tools: MissingSetting: PLATFORM_TOKEN, PLATFORM_URL are not set\n")
    assert.include(debug.stderr, "    at ", "the stack, at debug")
    const platform = await main(["platform", "--port", "0"], unset)
    assert.strictEqual(platform.code, 1)
    assert.strictEqual(platform.stderr, "agent-tools: MissingSetting: PLATFORM_TOKENS (or --tokens-file, --tokens) is not set\n")
  }, 60_000)

  it("approve names every missing setting at once; PLATFORM_TOKENS set but malformed says so, and the form, not the tokens", async () => {
    const [approve, malformed, blank] = await Promise.all([
      main(["approve", "--task", "t", "--call", "c"], unset),
      main(["platform", "--port", "0"], { ...unset, PLATFORM_TOKENS: "s3cret-a,tok-b:agent-b, :agent-c" }),
      main(["platform", "--port", "0"], { ...unset, PLATFORM_TOKENS: " , " })
    ])
    assert.strictEqual(approve.code, 1)
    assert.strictEqual(approve.stderr, "agent-tools: MissingSetting: PLATFORM_TOKEN, PLATFORM_URL are not set\n")
    assert.strictEqual(malformed.code, 1)
    assert.strictEqual(
      malformed.stderr,
      "agent-tools: BadOptions: PLATFORM_TOKENS is malformed: entries 1, 3 of 3 are not token:agent; the form is " +
        "token:agent pairs, comma-separated or one a line, e.g. tok-1:agent-a,tok-2:agent-b\n"
    )
    assert.notInclude(malformed.stderr, "s3cret")
    assert.strictEqual(blank.code, 1)
    assert.strictEqual(blank.stderr, "agent-tools: MissingSetting: PLATFORM_TOKENS (or --tokens-file, --tokens) is not set\n")
  }, 60_000)

  it("values the commands cannot use stop them, each named: LOG_LEVEL=loud, URLs, mcp --port without --http, PLATFORM_AGENT_CALLS", async () => {
    const tokens = { PLATFORM_TOKENS: "tok-a:agent-a,tok-b:agent-b" }
    const [loud, port, ...calls] = await Promise.all([
      main(["serve"], { ...unset, LOG_LEVEL: "loud" }),
      main(["mcp", "--port", "9999"], unset),
      ...["agent-a : agent-b", "agent-a:agent-b:agent-c", "__proto__:agent-b", "agent-a:agent-z"].map((value) =>
        main(["platform", "--port", "0"], { ...unset, ...tokens, PLATFORM_AGENT_CALLS: `agent-a:agent-b,${value}` })
      )
    ])
    assert.strictEqual(loud.code, 1)
    assert.strictEqual(loud.stderr, "agent-tools: BadOptions: LOG_LEVEL is malformed: one of all, trace, debug, info, warn, error, fatal, off\n")
    const malformed = await Promise.all(
      [
        ["PLATFORM_URL", "garbage", "ws://host:port/rpc (or wss://), or a comma-separated list of them"],
        ["OPENAI_BASE_URL", "not a url", "an http:// or https:// URL"],
        ["PLATFORM_DATABASE", "mysql://h/db", "postgres://user:password@host:port/db"]
      ].map(async ([name, value, form]) => ({ form, name, refused: await main(["serve"], { ...unset, [name!]: value! }) }))
    )
    for (const { form, name, refused } of malformed) {
      assert.strictEqual(refused.code, 1)
      assert.strictEqual(refused.stderr, `agent-tools: BadOptions: ${name} is malformed: ${form}\n`)
    }
    assert.strictEqual(port.code, 1)
    assert.strictEqual(port.stderr, "agent-tools: BadOptions: mcp: --port is the HTTP server's: add --http, or leave --port out to serve over stdio\n")
    const why = [
      "entry 2 of 2 is not caller:callee (two agent ids, one colon, no blanks)",
      "entry 2 of 2 is not caller:callee (two agent ids, one colon, no blanks)",
      "entry 2 of 2 names __proto__, which cannot be an agent id",
      "entry 2 of 2 names agent agent-z, which no token of the platform serves"
    ]
    calls.forEach((refused, i) => {
      assert.strictEqual(refused.code, 1, refused.stderr)
      assert.strictEqual(
        refused.stderr,
        `agent-tools: BadOptions: PLATFORM_AGENT_CALLS cannot be used: ${why[i]}; the form is caller:callee pairs of the agents of ` +
          "PLATFORM_TOKENS, comma-separated or one a line, e.g. support:billing,support:shipping\n"
      )
    })
  }, 60_000)

  it("mcp --http with MCP_TOKENS malformed, empty or blank refuses to start, naming entries, not tokens", async () => {
    const [malformed, blank, ...blanks] = await Promise.all([
      main(["mcp", "--http", "--port", "0"], { ...unset, MCP_TOKENS: "tok-1:ide,s3cret-b" }),
      main(["mcp", "--http", "--port", "0"], { ...unset, MCP_TOKENS: " , " }),
      ...[" ", "\t", "\n", ""].map((value) => main(["mcp", "--http", "--port", "0"], { ...unset, MCP_TOKENS: value }))
    ])
    // Blank is not unset: never served without the tokens someone meant to require.
    for (const refused of blanks) {
      assert.strictEqual(refused.code, 1)
      assert.strictEqual(refused.stderr, "agent-tools: BadOptions: MCP_TOKENS is set but holds no token:name pair\n")
      assert.notInclude(refused.stdout + refused.stderr, "MCP over Streamable HTTP")
    }
    assert.strictEqual(malformed.code, 1)
    assert.strictEqual(
      malformed.stderr,
      "agent-tools: BadOptions: MCP_TOKENS is malformed: entry 2 of 2 is not token:name; the form is " +
        "token:name pairs, comma-separated or one a line, e.g. tok-1:ide,tok-2:ci\n"
    )
    assert.notInclude(malformed.stderr, "s3cret")
    assert.strictEqual(blank.code, 1)
    assert.strictEqual(blank.stderr, "agent-tools: BadOptions: MCP_TOKENS is set but holds no token:name pair\n")
  }, 60_000)

  it("serve logs the platform's URL without its userinfo or query; --tokens-file is read, --tokens warned about", async () => {
    const port = await freePort()
    const url = `ws://user:s3cret-pw@127.0.0.1:${port}/rpc?token=s3cret-q`
    const served = await main(["serve"], { ...unset, AGENT_ID: "a", PLATFORM_TOKEN: "t", PLATFORM_URL: url })
    assert.strictEqual(served.code, 1, "nothing listens there")
    assert.include(served.stderr, `connecting to ws://***:***@127.0.0.1:${port}/rpc?token=*** to serve 7 demo tools`)
    assert.notInclude(served.stderr, "registered", "nothing listens there: no registration is claimed")
    assert.notInclude(served.stdout + served.stderr, "s3cret")

    const dir = mkdtempSync(join(tmpdir(), "agent-tools-tokens-"))
    try {
      const file = join(dir, "tokens")
      writeFileSync(file, "tok-a:agent-a\ntok-b:agent-b\n")
      const platform = spawn(process.execPath, ["--import", "tsx", "src/main.ts", "platform", "--port", String(port), "--tokens-file", file], {
        cwd: root,
        env: { ...process.env, ...unset }
      })
      const log = watch(platform)
      try {
        // No PLATFORM_TOKENS, no --tokens: it started on the file's pairs.
        assert.isTrue(await log.until(/platform on ws:/, 20_000), log.text())
      } finally {
        platform.kill("SIGTERM")
      }
      assert.notInclude(log.text(), "tok-a")
      const flagged = spawn(process.execPath, ["--import", "tsx", "src/main.ts", "platform", "--port", "0", "--tokens", "tok-c:agent-c"], {
        cwd: root,
        env: { ...process.env, ...unset }
      })
      const flaggedLog = watch(flagged)
      try {
        assert.isTrue(await flaggedLog.until(/platform on ws:/, 20_000), flaggedLog.text())
        assert.match(flaggedLog.text(), /level=WARN .*--tokens puts secrets on the command line/)
      } finally {
        flagged.kill("SIGTERM")
      }
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  }, 90_000)

  it("platform --config: a file that cannot be used refuses the start naming the field; SIGHUP reloads it, a bad one kept out", async () => {
    const dir = mkdtempSync(join(tmpdir(), "agent-tools-config-"))
    try {
      const file = join(dir, "platform.json")
      writeFileSync(file, JSON.stringify({ agents: { billing: { maxSteps: 0, tokens: ["tok-billing"] } } }))
      const refused = await main(["platform", "--port", "0", "--config", file], unset)
      assert.strictEqual(refused.code, 1)
      assert.strictEqual(
        refused.stderr,
        `agent-tools: BadOptions: ${file} cannot be used: agents.billing.maxSteps: expected a positive integer\n`
      )
      writeFileSync(file, JSON.stringify({ agents: { billing: { model: "scripted", maxSteps: 3, tokens: ["tok-billing"] } } }))
      const platform = spawn(process.execPath, ["--import", "tsx", "src/main.ts", "platform", "--port", "0", "--config", file], {
        cwd: root,
        env: { ...process.env, ...unset }
      })
      const log = watch(platform)
      try {
        assert.isTrue(await log.until(/platform on ws:.*agents billing of /, 20_000), log.text())
        writeFileSync(file, "{ not json")
        platform.kill("SIGHUP")
        assert.isTrue(await log.until(/not reloaded, the running one stays: .* is not JSON/, 10_000), log.text())
        writeFileSync(file, JSON.stringify({ agents: { billing: { maxSteps: 5, tokens: ["tok-billing"] } } }))
        platform.kill("SIGHUP")
        assert.isTrue(await log.until(/platform configuration .* reloaded: new tasks take its settings/, 10_000), log.text())
      } finally {
        platform.kill("SIGTERM")
      }
      assert.notInclude(log.text(), "tok-billing")
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  }, 90_000)
})

const freePort = () =>
  new Promise<number>((resolve) => {
    const server = createServer()
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      server.close(() => resolve(port))
    })
  })

const watch = (child: ChildProcess) => {
  let text = ""
  child.stdout?.on("data", (d) => (text += String(d)))
  child.stderr?.on("data", (d) => (text += String(d)))
  return {
    text: () => text,
    until: (pattern: RegExp, timeoutMillis: number) =>
      new Promise<boolean>((resolve) => {
        const started = Date.now()
        const check = () => {
          if (pattern.test(text)) return resolve(true)
          if (Date.now() - started > timeoutMillis) return resolve(false)
          setTimeout(check, 50)
        }
        check()
      })
  }
}

describe("main: platform and serve as two processes", () => {
  it("platform --port 0 logs the port it got; mcp --http on a port in use says EADDRINUSE and the port, and never that it listens", async () => {
    const platform = spawn(process.execPath, ["--import", "tsx", "src/main.ts", "platform", "--port", "0", "--tokens", "tok-z:agent-z"], {
      cwd: root,
      env: { ...process.env, PLATFORM_TOKENS: "", LOG_LEVEL: "" }
    })
    const log = watch(platform)
    try {
      assert.isTrue(await log.until(/platform on ws:/, 20_000), log.text())
      const port = Number(/platform on ws:\/\/127\.0\.0\.1:(\d+)\/rpc/.exec(log.text())?.[1])
      assert.isAbove(port, 0, log.text())
      // The port it names is the one it listens on.
      await new Promise<void>((resolve, reject) => {
        const socket = connect(port, "127.0.0.1", () => (socket.end(), resolve()))
        socket.on("error", reject)
      })
    } finally {
      platform.kill("SIGTERM")
    }
    const taken = createServer()
    const busy = await new Promise<number>((resolve) =>
      taken.listen(0, "127.0.0.1", () => resolve((taken.address() as { port: number }).port))
    )
    try {
      const mcp = await main(["mcp", "--http", "--port", String(busy)])
      assert.strictEqual(mcp.code, 1, mcp.stderr)
      assert.match(mcp.stderr, new RegExp(`agent-tools: BadOptions: mcp cannot listen on 127\\.0\\.0\\.1:${busy}: .*EADDRINUSE`))
      assert.notInclude(mcp.stdout + mcp.stderr, "MCP over Streamable HTTP at")
    } finally {
      taken.close()
    }
  }, 60_000)

  it("SIGINT to serve makes the platform record the deregistration before serve exits; DEBUG=true shows serve's debug lines", async () => {
    const port = await freePort()
    const env = { ...process.env, ANTHROPIC_API_KEY: "", OPENAI_API_KEY: "", LOG_LEVEL: "debug" }
    const platform = spawn(process.execPath, ["--import", "tsx", "src/main.ts", "platform", "--port", String(port), "--tokens", "tok-demo:demo-agent"], { cwd: root, env })
    const platformLog = watch(platform)
    try {
      assert.isTrue(await platformLog.until(/platform on ws:/, 20_000), platformLog.text())
      const serve = spawn(process.execPath, ["--import", "tsx", "src/main.ts", "serve"], {
        cwd: root,
        env: {
          ...env,
          LOG_LEVEL: "",
          DEBUG: "true",
          AGENT_ID: "demo-agent",
          PLATFORM_TOKEN: "tok-demo",
          PLATFORM_URL: `ws://127.0.0.1:${port}/rpc`
        }
      })
      const serveLog = watch(serve)
      assert.isTrue(await platformLog.until(/registered 7 tools/, 20_000), platformLog.text() + serveLog.text())
      // Serve's own word that registration returned (the platform's can come first): SIGINT before
      // it lands in the register call, before the deregistration is armed (Serve arms it once it returns).
      assert.isTrue(await serveLog.until(/demo-agent: registered/, 20_000), serveLog.text())
      // No IDEMPOTENCY_DB: said once, at start, since issue_refund is idempotent.
      const warnings = serveLog.text().split("\n").filter((line) => line.includes("level=WARN"))
      assert.strictEqual(warnings.length, 1, serveLog.text())
      assert.include(warnings[0], "IDEMPOTENCY_DB")
      const exited = new Promise<number | null>((resolve) => serve.on("exit", (code) => resolve(code)))
      serve.kill("SIGINT")
      assert.isTrue(await platformLog.until(/deregistered/, 10_000), platformLog.text())
      await exited
      assert.match(serveLog.text(), /stopping: 0 call\(s\) drained, 0 interrupted/)
      // Connecting first, then the registration the platform accepted, with the interval kept; DEBUG=true
      // (no LOG_LEVEL) shows the debug lines: the deregistration's.
      const text = serveLog.text()
      assert.match(text, /level=INFO .*agent demo-agent: registered 7 tool\(s\) \(lookup_order, .*\) as process-\S+; heartbeat every 60 s/)
      assert.isBelow(text.indexOf("connecting to ws://127.0.0.1"), text.indexOf("agent demo-agent: registered"))
      assert.match(text, /level=DEBUG .*agent demo-agent: deregistered/)
    } finally {
      platform.kill("SIGTERM")
    }
  }, 60_000)
})

describe("main: approve", () => {
  it("approve decides a suspended task's call on the platform at --url (PLATFORM_TOKEN); a call not waiting is refused, exit 1", () =>
    Effect.runPromise(Effect.gen(function*() {
      const dir = yield* Effect.acquireRelease(
        Effect.sync(() => mkdtempSync(join(tmpdir(), "agent-tools-approve-"))),
        (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
      )
      const policy = Timing.layer({ heartbeat: Schedule.spaced("1 second") })
      const platform = yield* Layer.build(PlatformServer.layerWebSocket({ port: 0 }).pipe(
        Layer.provideMerge(PlatformServer.layerHandlers({ tokens: new Map([["tok-1", "agent-1"]]), journal: join(dir, "journal.sqlite") })),
        Layer.provide(LanguageModel.layerScripted([
          { toolCalls: [{ id: "r1", name: "refund", arguments: JSON.stringify({ orderId: "A-1" }) }] },
          (request) => ({ text: resultsText(request) })
        ])),
        Layer.provide(policy)
      ))
      const url = yield* Effect.provide(PlatformServer.url, platform)
      const refund = Tool.make("refund", {
        description: "Refunds an order.",
        input: { orderId: Schema.String },
        timeout: "10 seconds",
        needsApproval: true
      }, ({ orderId }) => Effect.succeed(`refunded ${orderId}`))
      const toolkit = yield* Toolkit.make(refund)
      let taskId = ""
      const cli: Array<{ code: number | null; stdout: string; stderr: string }> = []
      const output = yield* Effect.gen(function*() {
        const served = yield* Serve.makeConfig(toolkit)
        const events = yield* served.submitTask("refund A-1").pipe(
          Stream.tap((event) => {
            if (event._tag !== "TaskSuspended") return Effect.void
            taskId = event.taskId
            const env = { PLATFORM_TOKEN: "tok-1", PLATFORM_URL: "" }
            return Effect.promise(async () => {
              cli.push(await main(["approve", "--url", url, "--task", taskId, "--call", "nope"], env))
              cli.push(await main(["approve", "--url", url, "--task", taskId, "--call", "r1"], env))
            })
          }),
          Stream.runCollect
        )
        const last = Chunk.unsafeLast(events)
        return last._tag === "TaskCompleted" ? last.output : `${last._tag}`
      }).pipe(Effect.scoped, Effect.provide(clientLayer({ url }, policy)))
      assert.strictEqual(cli[0]!.code, 1)
      assert.include(cli[0]!.stderr, `agent-tools: NoPendingTaskApproval: task ${taskId} does not wait for approval of call nope`)
      assert.strictEqual(cli[1]!.code, 0, cli[1]!.stderr)
      assert.include(cli[1]!.stdout, `approved: call r1 of task ${taskId}`)
      assert.strictEqual(output, "r1:\"refunded A-1\"")
    }).pipe(Effect.scoped, Logger.withMinimumLogLevel(LogLevel.Error))), 60_000)
})

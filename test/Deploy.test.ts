/**
 * The deployment examples (docs: operations, "Running under a supervisor"): the systemd units parse as INI with the
 * sections and keys a unit needs, the Containerfile as its instructions; each runs `node` on the package's bin (not a
 * wrapper a signal would stop instead), with options the CLI has; and the page shows each file as it is.
 */
import { assert, describe, it } from "@effect/vitest"
import { readFileSync } from "node:fs"

const read = (path: string) => readFileSync(new URL(`../${path}`, import.meta.url), "utf8")

const bin: string = JSON.parse(read("package.json")).bin["agent-tools"]
const page = read("docs/operations.md")
/** The CLI's sources, where every option is declared by name. */
const cli = read("src/main.ts") + read("src/internal/cli/serve.ts") + read("src/internal/cli/platformOptions.ts") + read("src/internal/cli.ts")

/** An INI file (a systemd unit): its sections, each key to its values (a key may repeat). */
const parseIni = (text: string) => {
  const sections = new Map<string, Map<string, Array<string>>>()
  let current: Map<string, Array<string>> | undefined
  for (const [i, raw] of text.split("\n").entries()) {
    const line = raw.trim()
    if (line === "" || line.startsWith("#") || line.startsWith(";")) continue
    const section = /^\[([A-Za-z]+)\]$/.exec(line)
    if (section !== null) {
      current = new Map()
      sections.set(section[1]!, current)
      continue
    }
    const pair = /^([A-Za-z]+)=(.*)$/.exec(line)
    if (pair === null || current === undefined) throw new Error(`line ${i + 1} is neither a section nor key=value: ${raw}`)
    current.set(pair[1]!, [...(current.get(pair[1]!) ?? []), pair[2]!])
  }
  return sections
}

/** A Containerfile's instructions, in order, continuation lines joined. */
const parseContainerfile = (text: string) =>
  text.replace(/\\\n/g, " ").split("\n").map((line) => line.trim()).filter((line) => line !== "" && !line.startsWith("#"))
    .map((line) => {
      const [instruction, ...rest] = line.split(/\s+/)
      return { instruction: instruction!, args: rest.join(" ") }
    })

/** The `--options` of a command line, each one the CLI declares. */
const assertKnownOptions = (args: ReadonlyArray<string>) => {
  for (const option of args.filter((arg) => arg.startsWith("--"))) {
    assert.include(cli, `"${option.slice(2)}"`, `${option} is an option of the CLI`)
  }
}

describe("the deployment examples", () => {
  it.each([
    ["examples/deploy/agent-tools-platform.service", "platform"],
    ["examples/deploy/agent-tools-serve.service", "serve"]
  ])("%s is a systemd unit running node on the bin", (path, command) => {
    const text = read(path)
    const unit = parseIni(text)
    assert.sameMembers([...unit.keys()], ["Unit", "Service", "Install"])
    const service = unit.get("Service")!
    const [execStart] = service.get("ExecStart")!
    const args = execStart!.split(/\s+/)
    assert.strictEqual(args[0], "/usr/bin/node")
    assert.isTrue(args[1]!.endsWith(`agent-tools/${bin.replace(/^\.\//, "")}`), args[1])
    assert.strictEqual(args[2], command)
    assertKnownOptions(args.slice(3))
    assert.deepStrictEqual(service.get("KillSignal"), ["SIGTERM"])
    assert.deepStrictEqual(service.get("Restart"), ["on-failure"])
    assert.isAbove(Number(service.get("TimeoutStopSec")![0]), 30)
    // Secrets from a file only the service reads, never on the command line.
    assert.isDefined(service.get("EnvironmentFile"))
    // V8's young generation enlarged for a server's many short-lived objects (docs/operations.md).
    assert.deepStrictEqual(service.get("Environment"), ["NODE_OPTIONS=--max-semi-space-size=64"])
    assert.notMatch(execStart!, /postgres:\/\/|--tokens |--database /)
    assert.deepStrictEqual(unit.get("Install")!.get("WantedBy"), ["multi-user.target"])
    assert.include(page, "```ini\n" + text + "```", "docs/operations.md shows the unit as it is")
  })

  it("examples/deploy/Containerfile runs node on the bin as PID 1, exec form", () => {
    const text = read("examples/deploy/Containerfile")
    const instructions = parseContainerfile(text)
    const known = new Set(["FROM", "ENV", "WORKDIR", "RUN", "USER", "EXPOSE", "STOPSIGNAL", "ENTRYPOINT", "CMD"])
    for (const { instruction } of instructions) assert.isTrue(known.has(instruction), instruction)
    assert.strictEqual(instructions[0]!.instruction, "FROM")
    assert.match(instructions[0]!.args, /^node:\d+/)
    const of = (name: string) => instructions.find((i) => i.instruction === name)!.args
    const entrypoint: Array<string> = JSON.parse(of("ENTRYPOINT"))
    const cmd: Array<string> = JSON.parse(of("CMD"))
    assert.strictEqual(entrypoint[0], "node")
    assert.isTrue(entrypoint[1]!.endsWith(`agent-tools/${bin.replace(/^\.\//, "")}`), entrypoint[1])
    assert.strictEqual(cmd[0], "platform")
    assertKnownOptions(cmd)
    assert.strictEqual(of("STOPSIGNAL"), "SIGTERM")
    assert.include(instructions.filter((i) => i.instruction === "ENV").map((i) => i.args), "NODE_OPTIONS=--max-semi-space-size=64")
    assert.notStrictEqual(of("USER"), "root")
    assert.include(of("RUN"), `agent-tools@${JSON.parse(read("package.json")).version}`)
    assert.include(page, "```dockerfile\n" + text + "```", "docs/operations.md shows the Containerfile as it is")
  })
})

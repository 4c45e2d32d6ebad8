/**
 * What V8's young collections keep of an agent run (design: Generators on hot paths). A run whose generator was a
 * new function each run left its objects to survive every young collection (about 770 bytes a run, a new scripted
 * model given in each run's options); made once at module level, a run leaves a few bytes. Measured in a child
 * process run with `--trace-gc-nvp`: the bytes each young collection kept, summed over the measured runs.
 */
import { assert, describe, it } from "@effect/vitest"
import { execFile } from "node:child_process"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"

const root = fileURLToPath(new URL("..", import.meta.url))
const runs = 4000

/** The bytes V8's young collections kept (`new_space_survived`) between the child's `measure` and `end` lines. */
const survived = async (): Promise<{ readonly bytes: number; readonly collections: number }> => {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    ["--trace-gc-nvp", "--import", "tsx", "test/support/survivorsChild.ts"],
    { cwd: root, env: { ...process.env, WARMUP: "2000", RUNS: String(runs) }, maxBuffer: 64 * 1024 * 1024 }
  )
  let measuring = false
  let bytes = 0
  let collections = 0
  for (const line of stdout.split("\n")) {
    if (line === "measure") measuring = true
    else if (line === "end") measuring = false
    else if (measuring && line.includes(" gc=s ")) {
      collections++
      bytes += Number(/ new_space_survived=(\d+)/.exec(line)?.[1] ?? Number.NaN)
    }
  }
  return { bytes, collections }
}

describe("young collections (design: Generators on hot paths)", () => {
  it("an agent run with a new model each run leaves under 200 bytes a run to the young collections", async () => {
    const { bytes, collections } = await survived()
    // The measured runs allocate about 70 MB: several young collections happen among them.
    assert.isAtLeast(collections, 2)
    assert.isBelow(bytes / runs, 200, `${bytes} bytes kept over ${collections} young collections`)
  }, 60_000)
})

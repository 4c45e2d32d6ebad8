/** How the benchmarks report: a row per figure, as a line for people or JSON for `all.ts`. */

export interface Row {
  readonly bench: string
  readonly measure: string
  readonly value: string
  readonly baseline?: string | undefined
  readonly ratio?: string | undefined
  readonly target?: string | undefined
}

/** Prints a row: JSON when run by `all.ts` (BENCH_JSON=1), else a readable line. */
export const report = (row: Row): void => {
  if (process.env.BENCH_JSON === "1") {
    process.stdout.write(`${JSON.stringify(row)}\n`)
    return
  }
  const extra = [
    row.baseline === undefined ? "" : `baseline ${row.baseline}`,
    row.ratio === undefined ? "" : `ratio ${row.ratio}`,
    row.target === undefined ? "" : `target ${row.target}`
  ].filter((s) => s !== "").join(", ")
  console.log(`${row.bench} | ${row.measure}: ${row.value}${extra === "" ? "" : ` (${extra})`}`)
}

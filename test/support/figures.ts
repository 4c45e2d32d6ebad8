/**
 * The reliability suite's figures. `npm test` runs the short version of each test;
 * `npm run soak` sets `SOAK=1` for the long versions and `FIGURES_FILE`, to which each test
 * appends the figures it measured, and prints them as one table at the end.
 */
import { appendFileSync } from "node:fs"

/** True under `npm run soak`. */
export const soak = process.env.SOAK === "1"

/** `short` under `npm test`, `long` under `npm run soak`. */
export const scale = <A>(short: A, long: A): A => soak ? long : short

/** One row of the soak table. */
export interface Figure {
  /** What was exercised: "hostile input", "duplicate storm", "faults", "secrets", "load", ... */
  readonly suite: string
  /** What was counted or timed. */
  readonly measure: string
  /** What came out. */
  readonly value: string | number
  /** What it has to be, when there is a bar ("0", "= unique calls", ">= 5,000"). */
  readonly expected?: string | undefined
}

/** Records a figure for the soak table (no-op unless `FIGURES_FILE` is set). */
export const record = (figure: Figure): void => {
  const file = process.env.FIGURES_FILE
  if (file !== undefined && file !== "") appendFileSync(file, JSON.stringify(figure) + "\n")
}

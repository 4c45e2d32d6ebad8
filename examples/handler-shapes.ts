/** One `Tool.make`, every shape of body: an async function with its signal, and a plain function. */
import { Schema } from "effect"
import { Tool } from "../src/index.js"

// #region shapes
export const fetchRate = Tool.make("fetch_rate", {
  description: "The exchange rate from one currency to another.",
  input: { from: Schema.String, to: Schema.String },
  output: Schema.Number,
  timeout: "5 seconds",
  retries: 1
}, async ({ from, to }, { signal }) => {
  const response = await fetch(`https://rates.example/${from}/${to}`, { signal }) // aborted at the deadline
  if (!response.ok) throw new Error(`rates answered ${response.status}`)          // "Error: rates answered 503"
  const body = await response.json() as { readonly rate: number } // the output Schema checks it
  return body.rate
})

export const vat = Tool.make("vat", {
  description: "VAT on an amount.",
  input: { amount: Schema.Number },
  timeout: "1 second"
}, ({ amount }) => Math.round(amount * 0.2 * 100) / 100) // a plain function: runs inline
// #endregion

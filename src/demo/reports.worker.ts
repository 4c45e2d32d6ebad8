/** The demo's CPU-bound work, run by the worker threads of `Backend.layerReports`, never on the event loop. */
import { createHash } from "node:crypto"
import * as WorkerPool from "../WorkerPool.js"

/** A report's digest: SHA-256 chained `rounds` times (real CPU, as scoring a long report would take). */
const digest = ({ rounds, text }: { readonly text: string; readonly rounds: number }) => {
  let hash = text
  for (let i = 0; i < rounds; i++) hash = createHash("sha256").update(hash).digest("hex")
  return { digest: hash, rounds }
}

WorkerPool.serve({ digest })

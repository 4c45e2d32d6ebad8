// digest.worker.ts, loaded by every worker of the pool: the functions it runs, by name.
import { createHash } from "node:crypto"
import { WorkerPool } from "../src/index.js"

const expensiveDigest = (text: string): string => {
  let digest = text
  for (let round = 0; round < 10_000; round++) digest = createHash("sha256").update(digest).digest("hex")
  return digest
}

WorkerPool.serve({ digest: ({ text }: { text: string }) => expensiveDigest(text) })

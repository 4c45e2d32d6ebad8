// The loader hooks of recordModules.mjs, run on the loader's own thread.
import { appendFileSync } from "node:fs"

let file

export const initialize = (data) => {
  file = data.file
}

export const load = async (url, context, next) => {
  const loaded = await next(url, context)
  appendFileSync(file, `${url}\n`)
  return loaded
}

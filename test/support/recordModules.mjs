// `node --import ./test/support/recordModules.mjs`: appends the URL of every module the process
// loads to the file named by RECORD_MODULES, one a line (loader hooks, so nothing is missed).
import { register } from "node:module"

register("./recordModulesHooks.mjs", import.meta.url, { data: { file: process.env.RECORD_MODULES } })

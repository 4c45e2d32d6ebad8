// @ts-check
/**
 * The console's browser tests drive Debian's `chromium` (`/usr/bin/chromium`) with playwright-core, which
 * downloads no browser. When it is missing and this runs as root (CI's container), it is installed with
 * apt-get; otherwise a missing one stops here, saying how to install it.
 */
import { execFileSync } from "node:child_process"
import { existsSync } from "node:fs"

const binary = "/usr/bin/chromium"

if (!existsSync(binary)) {
  if (process.getuid?.() !== 0) {
    console.error(`${binary} is missing: install Debian's chromium (sudo apt-get install -y chromium) to run the console's browser tests`)
    process.exit(1)
  }
  const apt = { stdio: /** @type {const} */ ("inherit"), env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" } }
  execFileSync("apt-get", ["update"], apt)
  execFileSync("apt-get", ["install", "-y", "--no-install-recommends", "chromium"], apt)
  if (!existsSync(binary)) {
    console.error(`apt-get installed chromium but ${binary} is not there`)
    process.exit(1)
  }
}

/**
 * The Chromium the console's browser tests drive (playwright-core, no browser download): Debian's `chromium`,
 * installed by scripts/ensure-chromium.mjs when missing (as root), launched headless with a fresh profile in a
 * temporary folder of the test's.
 */
import { execFileSync } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { chromium } from "playwright-core"

export const executablePath = "/usr/bin/chromium"

const args = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync"
]

/**
 * Chromium with a fresh profile, and the test's temporary folder (for its screenshots); `close` closes it and
 * deletes the profile, leaving the screenshots.
 */
export const launchChromium = async () => {
  execFileSync(process.execPath, ["scripts/ensure-chromium.mjs"], { stdio: "inherit" })
  const folder = mkdtempSync(join(tmpdir(), "console-test-"))
  const profile = join(folder, "profile")
  const context = await chromium.launchPersistentContext(profile, { executablePath, headless: true, args })
  const close = async () => {
    await context.close()
    rmSync(profile, { recursive: true, force: true })
  }
  return { context, folder, close }
}

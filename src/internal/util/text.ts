/**
 * Cutting a text to a bound, in one place: at a word's end (the last space before the bound, when it is past half of
 * it: only one word longer than that is cut inside), never inside a surrogate pair, the cut marked with "…". Error
 * texts, log lines and frames use it.
 */

/** `text` in at most `max` characters, the cut marked. */
export const clip = (text: string, max: number): string => {
  if (text.length <= max) return text
  let end = Math.max(0, max - 1)
  // Do not split a surrogate pair.
  const code = text.charCodeAt(end - 1)
  if (code >= 0xd800 && code <= 0xdbff) end--
  // A word's end: the text reads "... Encoded side …", not "... transforma…".
  const space = text.lastIndexOf(" ", end)
  if (space > 0 && space >= end / 2) end = space
  return text.slice(0, end).trimEnd() + "…"
}

/** An error's text for a log line, bounded: a client's text inside a parse error must not make it unbounded. */
export const reasonOf = (error: unknown, max = 300): string => clip(error instanceof Error ? error.message : String(error), max)

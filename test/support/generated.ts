/**
 * A suite's options when it checks thousands of generated cases (fast-check): seconds on a loaded machine, past
 * vitest's default 5 s a test.
 */
export const generatedCases = { timeout: 60_000 }

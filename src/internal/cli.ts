/**
 * How the CLI (`src/main.ts`) speaks, on top of @effect/cli: help without its filler and with each
 * option's default, colour only for a terminal, and a bad command line as what is wrong followed by
 * the usage, exit 2. Imports Effect module by module, as main.ts does (start-up time).
 */
import * as CliConfig from "@effect/cli/CliConfig"
import * as Descriptor from "@effect/cli/CommandDescriptor"
import * as HelpDoc from "@effect/cli/HelpDoc"
import type * as Span from "@effect/cli/HelpDoc/Span"
import * as Options from "@effect/cli/Options"
import * as Usage from "@effect/cli/Usage"
import * as ValidationError from "@effect/cli/ValidationError"
import type * as FileSystem from "@effect/platform/FileSystem"
import type * as Path from "@effect/platform/Path"
import type * as Terminal from "@effect/platform/Terminal"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"

/**
 * @effect/cli's settings: its built-in options (`--completions`, `--wizard`, `--log-level`, `--help`,
 * `--version`) still work but are not listed in every command's help; the help's footer names the two
 * that matter.
 */
export const config: CliConfig.CliConfig = { ...CliConfig.defaultConfig, showBuiltIns: false }

/** A command of the CLI, its name as typed, and its subcommands. */
export interface Node {
  readonly name: string
  readonly command: { readonly descriptor: Descriptor.Command<unknown> }
  readonly children?: ReadonlyArray<Node>
  /** It does nothing by itself (`tasks`, `approvals`): run without one of its subcommands, a bad command line. */
  readonly needsCommand?: boolean
}

/** Whether to colour what goes to `stream`: a terminal, and no `NO_COLOR` (https://no-color.org). */
export const colour = (stream: { readonly isTTY?: boolean }): boolean =>
  stream.isTTY === true && (process.env.NO_COLOR ?? "") === ""

/** `text` without its ANSI colour and style escapes. */
export const plain = (text: string): string => text.replace(/\x1b\[[0-9;]*m/g, "")

/** The console @effect/cli prints through (`--version`, `--completions`), without colour where there should be none. */
export const withPlainConsole = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.flatMap(Effect.console, (console) => {
    const strip = (stream: { readonly isTTY?: boolean }) => (args: ReadonlyArray<unknown>) =>
      colour(stream) ? args : args.map((arg) => typeof arg === "string" ? plain(arg) : arg)
    const out = strip(process.stdout)
    const err = strip(process.stderr)
    return Console.withConsole(effect, {
      ...console,
      log: (...args) => console.log(...out(args)),
      info: (...args) => console.info(...out(args)),
      error: (...args) => console.error(...err(args)),
      warn: (...args) => console.warn(...err(args))
    })
  })

/**
 * An integer option for a port (0: any free one), checked when the command line is parsed: a port out
 * of range is a bad command line (exit 2), before anything starts.
 */
export const portOption = (name: string, fallback: number, description: string) =>
  Options.integer(name).pipe(
    Options.withDescription(description),
    withDefault(fallback),
    Options.mapEffect((port) =>
      port >= 0 && port <= 65535
        ? Effect.succeed(port)
        : Effect.fail(ValidationError.invalidValue(HelpDoc.p(`--${name} must be a port number from 0 to 65535, not ${port}`)))
    )
  )

/**
 * An option's default, shown in its help: @effect/cli shows "This setting is optional." for a default
 * that is not an `Option`, and never the value.
 */
export const withDefault = <const A extends string | number>(fallback: A) => <B>(self: Options.Options<B>) =>
  self.pipe(Options.withDefault(fallback), Options.withDescription(`(default: ${fallback})`))

/** The text of a span, without style. */
const spanText = (span: Span.Span): string => {
  switch (span._tag) {
    case "Text":
      return span.value
    case "URI":
      return span.value
    case "Sequence":
      return spanText(span.left) + spanText(span.right)
    default:
      return spanText(span.value)
  }
}

/** The paragraphs of a help block, in order. */
const paragraphs = (doc: HelpDoc.HelpDoc): Array<string> => {
  switch (doc._tag) {
    case "Paragraph":
      return [spanText(doc.value)]
    case "Sequence":
      return [...paragraphs(doc.left), ...paragraphs(doc.right)]
    default:
      return []
  }
}

/** What @effect/cli says of every option of a type (the type is in the usage already), not of this one. */
const filler = /^(A user-defined piece of text\.|A true or false value\.|An integer\.|An existing file\.|A file\.)$/
const optional = /^This setting is optional\.(?: Defaults to: (.*))?$/

/** An option's (or argument's) help: its description and its default, no filler; a flag's default (false) goes without saying. */
const tidyDefinition = (block: HelpDoc.HelpDoc): HelpDoc.HelpDoc => {
  const texts = paragraphs(block)
  const flag = texts.includes("A true or false value.")
  let fallback: string | undefined
  const kept: Array<string> = []
  for (const text of texts) {
    const match = optional.exec(text)
    if (match !== null) fallback ??= match[1]
    else if (text.startsWith("(default: ")) fallback = text.slice("(default: ".length, -1)
    else if (!filler.test(text)) kept.push(text)
  }
  const description = kept.join(" ")
  if (fallback === undefined || flag || description.includes("default")) return HelpDoc.p(description)
  return HelpDoc.p(`${description} (default: ${fallback})`)
}

/**
 * A command's help without @effect/cli's filler, each option with its default; its subcommands (`names`,
 * in @effect/cli's order) by name and description, not by their whole usage padded to the longest.
 */
export const tidyHelp = (doc: HelpDoc.HelpDoc, names: ReadonlyArray<string> = []): HelpDoc.HelpDoc => {
  switch (doc._tag) {
    case "Sequence":
      return HelpDoc.sequence(tidyHelp(doc.left, names), tidyHelp(doc.right, names))
    case "DescriptionList":
      return HelpDoc.descriptionList(
        doc.definitions.map(([span, block]) => [span, tidyDefinition(block)] as [Span.Span, HelpDoc.HelpDoc]) as [
          [Span.Span, HelpDoc.HelpDoc],
          ...Array<[Span.Span, HelpDoc.HelpDoc]>
        ]
      )
    case "Enumeration": {
      if (doc.elements.length !== names.length) return doc
      const width = Math.max(...names.map((name) => name.length))
      const lines = doc.elements.map((element, i) => {
        const description = paragraphs(element).join(" ").split(/ {2,}/).slice(1).join(" ")
        return HelpDoc.p(`${names[i]!.padEnd(width)}  ${description}`)
      })
      return HelpDoc.enumeration(lines as [HelpDoc.HelpDoc, ...Array<HelpDoc.HelpDoc>])
    }
    default:
      return doc
  }
}

/** The names of a command's subcommands, theirs after each (`platform`, `platform migrate`). */
const subcommandNames = (node: Node, prefix = ""): Array<string> =>
  (node.children ?? []).flatMap((child) => [`${prefix}${child.name}`, ...subcommandNames(child, `${prefix}${child.name} `)])

/** The commands an argument list names, from the root down (`platform migrate ...`: root, platform, migrate). */
const commandPath = (root: Node, args: ReadonlyArray<string>): Array<Node> => {
  const path = [root]
  for (const arg of args) {
    const next = path[path.length - 1]!.children?.find((child) => child.name === arg)
    if (next !== undefined) path.push(next)
  }
  return path
}

/** Every name in a usage (`--port`, `-h`, `platform`). */
const usageNames = (usage: Usage.Usage): Array<string> => {
  switch (usage._tag) {
    case "Named":
      return [...usage.names]
    case "Optional":
    case "Repeated":
      return usageNames(usage.usage)
    case "Alternation":
    case "Concat":
      return [...usageNames(usage.left), ...usageNames(usage.right)]
    default:
      return []
  }
}

const builtIns = ["--help", "-h", "--version", "--wizard", "--completions", "--log-level"]

/** The first argument that looks like an option but is none of the commands' on the path (a negative number is a value). */
const unknownOption = (path: ReadonlyArray<Node>, args: ReadonlyArray<string>): string | undefined => {
  const known = new Set([...builtIns, ...path.flatMap((node) => usageNames(Descriptor.getUsage(node.command.descriptor)))])
  return args.find((arg) => arg.startsWith("-") && !/^-\d/.test(arg) && arg !== "--" && !known.has(arg.split("=")[0]!))
}

/**
 * The usage lines of the last command on `path`, each prefixed by the commands above it; of each of its subcommands
 * when it needs one.
 */
const usageText = (path: ReadonlyArray<Node>): string => {
  const last = path[path.length - 1]!
  if (last.needsCommand === true && last.children !== undefined) {
    return last.children.map((child) => usageText([...path, child]).replace(/^usage:/, "      ")).join("\n").replace(/^ {6}/, "usage:")
  }
  const prefix = path.slice(0, -1).map((node) => `${node.name} `).join("")
  const lines = Usage.enumerate(Descriptor.getUsage(last.command.descriptor), config)
  const commands = last.children === undefined ? "" : " [<command>]"
  return lines.map((span, i) => `${i === 0 ? "usage:" : "      "} ${prefix}${spanText(span)}${commands}`).join("\n")
}

/** @effect/cli's text of a bad command line, its grammar mended (`'abc' is not a integer`). */
const errorText = (error: ValidationError.ValidationError): string => {
  const text = "error" in error ? plain(HelpDoc.toAnsiText(error.error)).trim() : String(error)
  return text.replace(/ is not a (?=[aeiou])/gi, " is not an ")
}

/**
 * Parses the command line before @effect/cli runs it. `--help` is printed here (tidied); a bad command
 * line is one line of what is wrong, then the usage, on stderr. The exit code when the CLI is done
 * (0 after help, 2 after a bad command line), or undefined when the command is to run.
 */
export const preflight = (
  root: Node,
  args: ReadonlyArray<string>,
  header: string
): Effect.Effect<number | undefined, never, FileSystem.FileSystem | Path.Path | Terminal.Terminal> =>
  Descriptor.parse(root.command.descriptor, [root.name, ...args], config).pipe(
    Effect.map((directive) => {
      if (directive._tag === "UserDefined") {
        const [extra] = directive.leftover
        if (extra !== undefined) return badCommandLine(root, args, `unexpected argument '${extra}'`)
        const last = commandPath(root, args).at(-1)!
        return last.needsCommand === true && last.children !== undefined
          ? badCommandLine(root, args, `${last.name} needs a command: ${last.children.map((child) => child.name).join(", ")}`)
          : undefined
      }
      if (directive.option._tag !== "ShowHelp") return undefined
      const prefix = commandPath(root, args).slice(0, -1).map((node) => `${node.name} `).join("")
      const usage = Usage.enumerate(directive.option.usage, config).map((span) => HelpDoc.p(`$ ${prefix}${spanText(span)}`))
      const doc = HelpDoc.blocks([
        HelpDoc.p(header),
        HelpDoc.h1("USAGE"),
        ...usage,
        tidyHelp(directive.option.helpDoc, subcommandNames(commandPath(root, args).at(-1)!)),
        HelpDoc.p(`${root.name} <command> --help shows a command's options; --version prints the version.`)
      ])
      const text = HelpDoc.toAnsiText(doc)
      process.stdout.write(`${colour(process.stdout) ? text : plain(text)}\n`)
      return 0
    }),
    Effect.catchAll((error) => Effect.sync(() => badCommandLine(root, args, errorText(error))))
  )

/** What is wrong with the command line (an unknown option named as such), then the usage, on stderr; exit code 2. */
const badCommandLine = (root: Node, args: ReadonlyArray<string>, problem: string): number => {
  const path = commandPath(root, args)
  const option = unknownOption(path, args)
  const what = option === undefined ? problem : `unknown option ${option.split("=")[0]}`
  const last = path[path.length - 1]!
  const help = path.map((node) => node.name).join(" ")
  process.stderr.write(
    `${root.name}: ${what}\n\n${usageText(path)}\n\n${help} --help describes ${last === root ? "the commands" : "its options"}\n`
  )
  return 2
}

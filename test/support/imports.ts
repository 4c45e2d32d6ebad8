/**
 * The structure of `src/`, read with the TypeScript parser (no type checking): each module's imports
 * (static, type-only, re-exports, dynamic `import("...")` and `import("...")` types), the cycles they
 * make, and every function's length in lines. Used by test/Architecture.test.ts and
 * scripts/structure.ts.
 */
import { readdirSync, readFileSync } from "node:fs"
import { dirname, join, relative, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import ts from "typescript"

/** The repository's root (this file is test/support/imports.ts). */
export const root = fileURLToPath(new URL("../..", import.meta.url))

/** Every TypeScript module under `dir` (relative to the root), as root-relative paths with `/`. */
export const modulesUnder = (dir: string): Array<string> => {
  const found: Array<string> = []
  const walk = (at: string) => {
    for (const entry of readdirSync(join(root, at), { withFileTypes: true })) {
      const path = `${at}/${entry.name}`
      if (entry.isDirectory()) walk(path)
      else if (entry.name.endsWith(".ts") && !entry.name.endsWith(".d.ts")) found.push(path)
    }
  }
  walk(dir)
  return found.sort()
}

const parsed = new Map<string, ts.SourceFile>()

/** The module's syntax tree, parsed once. */
const sourceOf = (module: string): ts.SourceFile => {
  let source = parsed.get(module)
  if (source === undefined) {
    source = ts.createSourceFile(module, readFileSync(join(root, module), "utf8"), ts.ScriptTarget.Latest, true)
    parsed.set(module, source)
  }
  return source
}

/** How a module names another. */
export type ImportKind = "static" | "type" | "export" | "dynamic"

/** One import of a module. */
export interface Import {
  readonly specifier: string
  readonly kind: ImportKind
  /** The root-relative module a relative specifier names (`./X.js` is `X.ts`); undefined for a package. */
  readonly target: string | undefined
  readonly line: number
}

const targetOf = (module: string, specifier: string): string | undefined => {
  if (!specifier.startsWith(".")) return undefined
  const path = relative(root, resolve(root, dirname(module), specifier)).split("\\").join("/")
  return path.endsWith(".js") ? `${path.slice(0, -3)}.ts` : path.endsWith(".ts") ? path : `${path}.ts`
}

/** Every import of `module`: declarations, re-exports, `import("...")` calls and `import("...")` types. */
export const importsOf = (module: string): Array<Import> => {
  const source = sourceOf(module)
  const imports: Array<Import> = []
  const add = (literal: ts.Node, kind: ImportKind) => {
    if (!ts.isStringLiteralLike(literal)) return
    const line = source.getLineAndCharacterOfPosition(literal.getStart()).line + 1
    imports.push({ specifier: literal.text, kind, target: targetOf(module, literal.text), line })
  }
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node)) {
      add(node.moduleSpecifier, node.importClause?.isTypeOnly === true ? "type" : "static")
    } else if (ts.isExportDeclaration(node) && node.moduleSpecifier !== undefined) {
      add(node.moduleSpecifier, node.isTypeOnly ? "type" : "export")
    } else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference)) {
      add(node.moduleReference.expression, "static")
    } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
      const [first] = node.arguments
      if (first !== undefined) add(first, "dynamic")
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument)) {
      add(node.argument.literal, "type")
    }
    ts.forEachChild(node, visit)
  }
  visit(source)
  return imports
}

/** The modules of `modules` each imports (any kind), itself among `modules` only. */
export const importGraph = (modules: ReadonlyArray<string>): Map<string, Set<string>> => {
  const known = new Set(modules)
  return new Map(modules.map((module) => [
    module,
    new Set(importsOf(module).flatMap(({ target }) => target !== undefined && known.has(target) ? [target] : []))
  ]))
}

/**
 * The import cycles of `graph`: one per strongly connected component of more than one module (or a
 * module importing itself), each a path `a -> b -> ... -> a` through it.
 */
export const cyclesOf = (graph: ReadonlyMap<string, ReadonlySet<string>>): Array<Array<string>> => {
  const index = new Map<string, number>()
  const low = new Map<string, number>()
  const stack: Array<string> = []
  const onStack = new Set<string>()
  const components: Array<Array<string>> = []
  let next = 0
  // Tarjan's algorithm, recursive: src/ is small.
  const connect = (module: string) => {
    index.set(module, next)
    low.set(module, next)
    next++
    stack.push(module)
    onStack.add(module)
    for (const to of graph.get(module) ?? []) {
      if (!index.has(to)) {
        connect(to)
        low.set(module, Math.min(low.get(module)!, low.get(to)!))
      } else if (onStack.has(to)) {
        low.set(module, Math.min(low.get(module)!, index.get(to)!))
      }
    }
    if (low.get(module) !== index.get(module)) return
    const component: Array<string> = []
    let popped: string
    do {
      popped = stack.pop()!
      onStack.delete(popped)
      component.push(popped)
    } while (popped !== module)
    if (component.length > 1 || graph.get(module)?.has(module) === true) components.push(component)
  }
  for (const module of graph.keys()) if (!index.has(module)) connect(module)
  return components.map((component) => cycleThrough(graph, new Set(component)))
}

/** A shortest cycle from the component's first module (in sorted order) back to it, inside the component. */
const cycleThrough = (graph: ReadonlyMap<string, ReadonlySet<string>>, component: ReadonlySet<string>): Array<string> => {
  const start = [...component].sort()[0]!
  const previous = new Map<string, string>()
  const queue = [start]
  while (queue.length > 0) {
    const at = queue.shift()!
    for (const to of [...(graph.get(at) ?? [])].sort()) {
      if (!component.has(to)) continue
      if (to === start) {
        const path = [at]
        while (path[0] !== start) path.unshift(previous.get(path[0]!)!)
        return [...path, start]
      }
      if (!previous.has(to)) {
        previous.set(to, at)
        queue.push(to)
      }
    }
  }
  return [start, start]
}

/** One function of a module and its length: lines from its first to its last, nested functions included. */
export interface FunctionLength {
  readonly module: string
  readonly name: string
  readonly line: number
  readonly lines: number
}

/** The name a function is declared with: its own, or the variable's or property's it is the value of. */
const declaredName = (node: ts.Node): string | undefined => {
  const named = node as { readonly name?: ts.Node }
  if (named.name !== undefined && (ts.isIdentifier(named.name) || ts.isPrivateIdentifier(named.name))) {
    return named.name.text
  }
  if (ts.isConstructorDeclaration(node)) return "constructor"
  const parent = node.parent as ts.Node | undefined
  if (parent !== undefined && (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent))) {
    return ts.isIdentifier(parent.name) ? parent.name.text : undefined
  }
  return undefined
}

/** Its declared name; an anonymous function (a callback, an `Effect.gen` body) is named by the nearest named one around it. */
const nameOf = (node: ts.Node): string => {
  const declared = declaredName(node)
  if (declared !== undefined) return declared
  for (let around = node.parent as ts.Node | undefined; around !== undefined; around = around.parent) {
    const name = ts.isFunctionLike(around) || ts.isVariableDeclaration(around) || ts.isPropertyAssignment(around)
      ? declaredName(around) ?? (ts.isVariableDeclaration(around) || ts.isPropertyAssignment(around)
        ? (ts.isIdentifier(around.name) ? around.name.text : undefined)
        : undefined)
      : undefined
    if (name !== undefined) return `<anonymous in ${name}>`
  }
  return "<anonymous>"
}

/** Every function of `module` (declarations, expressions, arrows, methods, accessors, constructors). */
export const functionsOf = (module: string): Array<FunctionLength> => {
  const source = sourceOf(module)
  const found: Array<FunctionLength> = []
  const visit = (node: ts.Node): void => {
    if (ts.isFunctionLike(node) && (node as { readonly body?: ts.Node }).body !== undefined) {
      const first = source.getLineAndCharacterOfPosition(node.getStart()).line + 1
      const last = source.getLineAndCharacterOfPosition(node.getEnd()).line + 1
      found.push({ module, name: nameOf(node), line: first, lines: last - first + 1 })
    }
    ts.forEachChild(node, visit)
  }
  visit(source)
  return found
}

/** A name one module takes from another, and the line where it does. */
export interface TakenName {
  readonly name: string
  readonly line: number
}

/**
 * What `module` takes from `target` (both root-relative), by name: what it imports or re-exports by name, what it
 * reads off a namespace import of it (`Pipeline.start`, as a value or a type), the name an `import("...")` type
 * reads; `*` for what cannot be told by name (`export *`, a dynamic import, `import = require`, a namespace
 * used whole).
 */
export const namesTakenFrom = (module: string, target: string): Array<TakenName> => {
  const source = sourceOf(module)
  const taken: Array<TakenName> = []
  const namespaces = new Set<string>()
  const lineOf = (node: ts.Node) => source.getLineAndCharacterOfPosition(node.getStart()).line + 1
  const names = (literal: ts.Node) => ts.isStringLiteralLike(literal) && targetOf(module, literal.text) === target
  const take = (name: string, node: ts.Node) => taken.push({ name, line: lineOf(node) })
  const declared = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node) && names(node.moduleSpecifier)) {
      const clause = node.importClause
      if (clause?.name !== undefined) take("default", clause.name)
      const bindings = clause?.namedBindings
      if (bindings !== undefined && ts.isNamespaceImport(bindings)) namespaces.add(bindings.name.text)
      else if (bindings !== undefined) for (const e of bindings.elements) take((e.propertyName ?? e.name).text, e)
    } else if (ts.isExportDeclaration(node) && node.moduleSpecifier !== undefined && names(node.moduleSpecifier)) {
      const clause = node.exportClause
      if (clause !== undefined && ts.isNamedExports(clause)) for (const e of clause.elements) take((e.propertyName ?? e.name).text, e)
      else take("*", node)
    } else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference)) {
      if (names(node.moduleReference.expression)) take("*", node)
    } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
      if (node.arguments[0] !== undefined && names(node.arguments[0])) take("*", node)
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument) && names(node.argument.literal)) {
      const qualifier = node.qualifier
      take(qualifier === undefined ? "*" : ts.isIdentifier(qualifier) ? qualifier.text : leftmost(qualifier), node)
    }
    ts.forEachChild(node, declared)
  }
  declared(source)
  if (namespaces.size === 0) return taken
  // The members read off a namespace import; the namespace used whole (passed on, spread) takes everything.
  const used = (node: ts.Node): void => {
    if (ts.isIdentifier(node) && namespaces.has(node.text) && !ts.isNamespaceImport(node.parent)) {
      const parent = node.parent
      if (ts.isPropertyAccessExpression(parent) && parent.expression === node) take(parent.name.text, parent)
      else if (ts.isQualifiedName(parent) && parent.left === node) take(parent.right.text, parent)
      else take("*", node)
    }
    ts.forEachChild(node, used)
  }
  used(source)
  return taken
}

/** `A.B.C`'s `A`: the name an `import("...")` type reads off the module. */
const leftmost = (name: ts.QualifiedName): string => ts.isIdentifier(name.left) ? name.left.text : leftmost(name.left)

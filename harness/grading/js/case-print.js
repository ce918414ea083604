// What a test case's callback says, with names and layout left out (the held-out twin rule of
// harness/authoring/eligibility.py): its shape, its literal values in order, and the project API
// it uses. Works on @babel/parser's tree, so comments and whitespace are gone already; TypeScript
// annotations and `as`/`!`/`satisfies` wrappers are skipped, so a `.ts` mirror of a `.js` case
// has the same shape. Only reads the tree.
'use strict';

// Keys that carry positions, comments or types: never part of a shape.
const SKIP = new Set([
  'start', 'end', 'loc', 'range', 'extra', 'comments', 'leadingComments', 'trailingComments',
  'innerComments', 'typeAnnotation', 'returnType', 'typeParameters', 'typeArguments',
  'superTypeParameters', 'predicate', 'implements', 'accessibility', 'declare', 'definite',
  'abstract', 'override', 'readonly',
]);
const WRAPS = new Set([
  'TSAsExpression', 'TSSatisfiesExpression', 'TSNonNullExpression', 'TSTypeAssertion',
  'TSInstantiationExpression', 'ParenthesizedExpression',
]);
const VALUES = new Set(['undefined', 'NaN', 'Infinity']);
const MEMBER = new Set(['MemberExpression', 'OptionalMemberExpression']);

function unwrap(n) {
  while (n && WRAPS.has(n.type)) n = n.expression;
  return n;
}

function children(node, fn) {
  for (const k of Object.keys(node)) {
    if (SKIP.has(k)) continue;
    const v = node[k];
    if (Array.isArray(v)) v.forEach((c) => c && typeof c.type === 'string' && fn(c, k, node));
    else if (v && typeof v.type === 'string') fn(v, k, node);
  }
}

function walk(node, fn) {
  fn(node);
  children(node, (c) => walk(c, fn));
}

// The names a pattern binds (a parameter, a declaration's id).
function patternNames(p, out) {
  if (!p) return out;
  p = unwrap(p);
  if (p.type === 'Identifier') out.push(p.name);
  else if (p.type === 'ObjectPattern') p.properties.forEach((x) => patternNames(x.type === 'RestElement' ? x.argument : x.value, out));
  else if (p.type === 'ArrayPattern') p.elements.forEach((x) => patternNames(x, out));
  else if (p.type === 'AssignmentPattern') patternNames(p.left, out);
  else if (p.type === 'RestElement') patternNames(p.argument, out);
  else if (p.type === 'TSParameterProperty') patternNames(p.parameter, out);
  return out;
}

// Every name bound inside ``fn`` (its parameters and anything declared in it): these are
// renamed to placeholders; names from outside (the project's API, the file's helpers, Jest's
// globals) are kept, so two literal-free cases that call different functions differ.
function boundIn(fn) {
  const out = [];
  walk(fn, (n) => {
    if (/Function|ArrowFunction|ObjectMethod|ClassMethod/.test(n.type)) {
      (n.params || []).forEach((p) => patternNames(p, out));
      if (n.id && n.type !== 'ObjectMethod') patternNames(n.id, out);
    } else if (n.type === 'VariableDeclarator') patternNames(n.id, out);
    else if (n.type === 'CatchClause') patternNames(n.param, out);
    else if (n.type === 'ClassDeclaration' && n.id) out.push(n.id.name);
  });
  return new Set(out);
}

function isKey(key, parent) {
  if (!parent) return false;
  if (MEMBER.has(parent.type)) return key === 'property' && !parent.computed;
  return key === 'key' && !parent.computed;
}

function literal(n) {
  switch (n.type) {
    case 'StringLiteral': return 's' + JSON.stringify(n.value);
    case 'NumericLiteral': return 'n' + String(n.value);
    case 'BigIntLiteral': return 'i' + n.value;
    case 'BooleanLiteral': return 'b' + n.value;
    case 'NullLiteral': return 'null';
    case 'RegExpLiteral': return 'r/' + n.pattern + '/' + n.flags;
    case 'UnaryExpression': {
      const a = unwrap(n.argument);
      return n.operator === '-' && a && a.type === 'NumericLiteral' ? 'n-' + String(a.value) : undefined;
    }
    default: return undefined;
  }
}

// The root a call or member chain hangs from: `v` of `v.compile(s).then`, `Validator` of
// `new Validator().validate`.
function root(n) {
  for (;;) {
    n = unwrap(n);
    if (!n) return null;
    if (MEMBER.has(n.type)) n = n.object;
    else if (/CallExpression$|NewExpression/.test(n.type)) n = n.callee;
    else if (n.type === 'AwaitExpression') n = n.argument;
    else return n.type === 'Identifier' ? n.name : null;
  }
}

// A module of the project itself: a relative or absolute path, not a package of node_modules
// (`require('mongodb').ObjectId` is not the project's API).
function own(spec) {
  return typeof spec === 'string' && (spec.startsWith('.') || spec.startsWith('/'));
}

// Whether ``n`` is a chain on `require('./x')` of a project module.
function isRequire(n) {
  for (;;) {
    n = unwrap(n);
    if (!n) return false;
    if (n.type === 'CallExpression' && n.callee.type === 'Identifier' && n.callee.name === 'require') {
      const a = n.arguments[0];
      return !!a && a.type === 'StringLiteral' && own(a.value);
    }
    if (MEMBER.has(n.type)) n = n.object;
    else if (/CallExpression$|NewExpression/.test(n.type)) n = n.callee;
    else if (n.type === 'AwaitExpression') n = n.argument;
    else return false;
  }
}

// What the file takes from the project's own modules: {named: local -> exported name of
// `import { x }` and `const { x } = require(...)`, values: every local bound to such an import or
// require, or to a value made from one (`const v = new Validator()`), wherever it is declared}.
function imports(ast) {
  const named = new Map();
  const values = new Set();
  for (const s of ast.program.body) {
    if (s.type !== 'ImportDeclaration' || s.importKind === 'type' || !own(s.source.value)) continue;
    for (const sp of s.specifiers) {
      values.add(sp.local.name);
      if (sp.type === 'ImportSpecifier' && sp.importKind !== 'type') {
        named.set(sp.local.name, sp.imported.name || sp.imported.value);
      }
    }
  }
  walk(ast.program, (n) => {
    if (n.type !== 'VariableDeclarator' || !n.init) return;
    const init = unwrap(n.init);
    const fromRequire = isRequire(init);
    if (!fromRequire && !values.has(root(init))) return;
    const id = unwrap(n.id);
    if (id.type === 'ObjectPattern' && fromRequire) {
      for (const p of id.properties) {
        if (p.type === 'ObjectProperty' && !p.computed && p.key.type === 'Identifier') {
          const local = patternNames(p.value, []);
          local.forEach((l) => { named.set(l, p.key.name); values.add(l); });
        }
      }
    } else if (MEMBER.has(init.type) && fromRequire && !init.computed && id.type === 'Identifier') {
      named.set(id.name, init.property.name); // const x = require('../lib').x
      values.add(id.name);
    } else patternNames(id, []).forEach((l) => values.add(l));
  });
  return { named, values };
}

// The case's callback ``fn``: {shape, literals (in source order), api}.
function print(fn, from) {
  const bound = boundIn(fn);
  const names = new Map();
  const out = [];
  const literals = [];
  const api = new Set();
  const visit = (node, key, parent) => {
    node = unwrap(node);
    const lit = literal(node);
    if (lit !== undefined) {
      literals.push([node.start, lit]);
      out.push('L' + lit);
      return;
    }
    if (node.type === 'Identifier') {
      const n = node.name;
      if (isKey(key, parent)) out.push('.' + n);
      else if (bound.has(n)) {
        if (!names.has(n)) names.set(n, '$' + names.size);
        out.push(names.get(n));
      } else if (VALUES.has(n)) {
        literals.push([node.start, 'v' + n]);
        out.push('Lv' + n);
      } else {
        out.push('@' + n);
        if (from.named.has(n)) api.add(from.named.get(n));
      }
      return;
    }
    if (node.type === 'TemplateElement') {
      const cooked = node.value.cooked;
      if (cooked) literals.push([node.start, 's' + JSON.stringify(cooked)]);
      out.push('T' + JSON.stringify(cooked));
      return;
    }
    if (MEMBER.has(node.type) && !node.computed && node.property.type === 'Identifier') {
      const r = root(node.object);
      if (r && !bound.has(r) && from.values.has(r)) api.add(node.property.name);
    }
    out.push('(' + node.type);
    for (const k of Object.keys(node).sort()) {
      if (SKIP.has(k) || k === 'type' || (k === 'optional' && node.type === 'Identifier')) continue;
      const v = node[k];
      if (Array.isArray(v)) {
        out.push(k + '[');
        v.forEach((c) => (c && typeof c.type === 'string' ? visit(c, k, node) : out.push(JSON.stringify(c))));
        out.push(']');
      } else if (v && typeof v.type === 'string') {
        out.push(k + ':');
        visit(v, k, node);
      } else if (v === null || typeof v !== 'object') out.push(k + '=' + JSON.stringify(v));
    }
    out.push(')');
  };
  visit(fn);
  // In the order they are written (the shape's walk takes keys in name order: callee after
  // arguments).
  literals.sort((a, b) => a[0] - b[0]);
  return { shape: out.join(' '), literals: literals.map((x) => x[1]), api: [...api].sort() };
}

module.exports = { print, imports, walk };

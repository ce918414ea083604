// What the project defines and what each test case calls of it, by name: the near-twin rule of
// harness/runs/held_out.py. Reads {parser, files: {sources: {path: text}, tests: {path: [[start, end]]},
// texts: {path: text}}} on stdin (``tests``: the spans of the case callbacks that
// testcases.js listed in ``texts``; all of it as ``files``, the shape
// harness/grading/cases.py parse_with sends), writes {defined: [name],
// calls: {path: [[name]]}} on stdout, one list of names per span in the order given (`new C`
// for a constructor). Parses with
// the same tree and walk as the eligibility rule (parse-source.js, case-print.js); only parses,
// no project code runs.
'use strict';

const input = JSON.parse(require('fs').readFileSync(0, 'utf8'));
const ask = input.files;
const { parse } = require(input.parser);
const tryParse = require('./parse-source')(parse);
const { walk } = require('./case-print');

const FN = /Function|ArrowFunction/;
const MEMBER = new Set(['MemberExpression', 'OptionalMemberExpression']);

function unwrap(n) {
  while (n && /^TS(As|Satisfies|NonNull)Expression$|^TSTypeAssertion$|^ParenthesizedExpression$/.test(n.type)) n = n.expression;
  return n;
}

function keyName(key, computed) {
  if (!key || computed) return key && key.type === 'StringLiteral' ? key.value : null;
  if (key.type === 'Identifier' || key.type === 'PrivateName') return key.name || (key.id && key.id.name);
  return key.type === 'StringLiteral' ? key.value : null;
}

// The names the project's own files give functions, methods and classes: declarations, methods,
// properties and assignments whose value is a function or a class. A call of any other name (a
// built-in's method, Jest's API, a helper of the test file) says nothing of the project's code.
function defined(ast, out) {
  walk(ast.program, (n) => {
    if ((n.type === 'FunctionDeclaration' || n.type === 'ClassDeclaration' || n.type === 'ClassExpression') && n.id) out.add(n.id.name);
    else if (/^(ClassMethod|ClassPrivateMethod|ObjectMethod|TSDeclareMethod)$/.test(n.type)) {
      const k = keyName(n.key, n.computed);
      if (k) out.add(k);
    } else if (/^(ObjectProperty|ClassProperty|ClassPrivateProperty)$/.test(n.type)) {
      const v = unwrap(n.value);
      const k = keyName(n.key, n.computed);
      if (k && v && (FN.test(v.type) || /^Class/.test(v.type))) out.add(k);
    } else if (n.type === 'VariableDeclarator' && n.id.type === 'Identifier') {
      const v = unwrap(n.init);
      if (v && (FN.test(v.type) || /^Class/.test(v.type))) out.add(n.id.name);
    } else if (n.type === 'AssignmentExpression') {
      const v = unwrap(n.right);
      const l = unwrap(n.left);
      if (!v || !(FN.test(v.type) || /^Class/.test(v.type))) return;
      if (l.type === 'Identifier') out.add(l.name);
      else if (MEMBER.has(l.type)) {
        const k = keyName(l.property, l.computed);
        if (k) out.add(k);
      }
    }
  });
  return out;
}

// The name a call or `new` calls: `f` of `f(x)`, `m` of `a.b.m(x)` and of `a?.m(x)`, `C` of `new C()`.
function callee(n) {
  const c = unwrap(n.callee);
  if (!c) return null;
  if (c.type === 'Identifier') return c.name;
  if (MEMBER.has(c.type)) return keyName(c.property, c.computed);
  return null;
}

function calls(fn) {
  const out = new Set();
  walk(fn, (n) => {
    if (/^(CallExpression|OptionalCallExpression|NewExpression)$/.test(n.type)) {
      const name = callee(n);
      if (name) out.add(n.type === 'NewExpression' ? `new ${name}` : name);
    }
  });
  return out;
}

const names = new Set();
for (const [file, text] of Object.entries(ask.sources)) {
  const ast = tryParse(text, file);
  if (ast) defined(ast, names);
}
const result = { defined: [...names].sort(), calls: {} };
for (const [file, spans] of Object.entries(ask.tests)) {
  const ast = tryParse(ask.texts[file], file);
  const byspan = new Map();
  if (ast) walk(ast.program, (n) => { if (FN.test(n.type)) byspan.set(`${n.start}:${n.end}`, n); });
  result.calls[file] = spans.map(([s, e]) => {
    const fn = byspan.get(`${s}:${e}`);
    return fn ? [...calls(fn)].filter((x) => names.has(x.replace(/^new /, ''))).sort() : null;
  });
}
process.stdout.write(JSON.stringify(result));

// The plain test cases of test files, found on the syntax tree (@babel/parser, the sandbox
// runner's own locked copy): what `etai suite build` may hold out of a session. Reads
// {parser, files: {path: text}} on stdin, writes {path: [{name, start, end, plain, shape,
// literals, api, body}]} on stdout. A plain case is a `test(...)` / `it(...)` statement whose title
// is a plain string, inside plain `describe(...)` blocks only, with Jest's full name (the describe
// titles and its own, joined by spaces) and the span of its whole lines: only such a case can be
// cut out of its file by text. Every other case (each, dynamic titles, cases built in loops or
// helpers) is listed with `plain: false` and no name, for the twin rule: each case carries its
// callback's print (case-print.js) and the span of its callback (`body`). Only parses: no project
// code runs.
'use strict';

const input = JSON.parse(require('fs').readFileSync(0, 'utf8'));
const { parse } = require(input.parser);

const tryParse = require('./parse-source')(parse);
const { print, imports, walk } = require('./case-print');

const CASE = new Set(['test', 'it', 'fit', 'xit', 'xtest']);

// The callee of a case in any form: test, it.only, test.each(table), test.concurrent.each``.
function isCase(callee) {
  for (;;) {
    if (!callee) return false;
    if (callee.type === 'Identifier') return CASE.has(callee.name);
    if (callee.type === 'MemberExpression') callee = callee.object;
    else if (callee.type === 'CallExpression') callee = callee.callee;
    else if (callee.type === 'TaggedTemplateExpression') callee = callee.tag;
    else return false;
  }
}

function callback(call) {
  for (let i = call.arguments.length - 1; i >= 0; i--) {
    const a = call.arguments[i];
    if (a.type === 'ArrowFunctionExpression' || a.type === 'FunctionExpression') return a;
  }
  return null;
}

function title(arg) {
  if (!arg) return null;
  if (arg.type === 'StringLiteral') return arg.value;
  if (arg.type === 'TemplateLiteral' && arg.expressions.length === 0) return arg.quasis[0].value.cooked;
  return null;
}

function callee(node) {
  return node && node.type === 'ExpressionStatement' && node.expression.type === 'CallExpression'
    && node.expression.callee.type === 'Identifier' ? node.expression : null;
}

// The statement's whole lines: from the start of its first line when only blanks precede it, to
// the end of its last line (its newline included) when only blanks follow it.
function lineSpan(text, start, end) {
  let s = start;
  while (s > 0 && (text[s - 1] === ' ' || text[s - 1] === '\t')) s--;
  if (s > 0 && text[s - 1] !== '\n') s = start;
  let e = end;
  while (e < text.length && (text[e] === ' ' || text[e] === '\t' || text[e] === ';')) e++;
  if (text[e] === '\n') e++;
  else if (e < text.length) e = end;
  return [s, e];
}

function cases(text, file) {
  const ast = tryParse(text, file);
  if (!ast) return [];
  const out = [];
  const from = imports(ast);
  const printed = (call) => {
    const fn = callback(call);
    return fn ? { ...print(fn, from), body: [fn.start, fn.end] } : { shape: null, literals: [], api: [], body: null };
  };
  const plainCalls = new Set();
  const plainWalk = (body, titles) => {
    for (const node of body) {
      const call = callee(node);
      if (!call) continue;
      const name = call.callee.name;
      const t = title(call.arguments[0]);
      if (t === null) continue;
      if (name === 'describe') {
        const fn = call.arguments[1];
        if (fn && (fn.type === 'ArrowFunctionExpression' || fn.type === 'FunctionExpression') && fn.body.type === 'BlockStatement') {
          plainWalk(fn.body.body, titles.concat(t));
        }
      } else if (name === 'test' || name === 'it') {
        const [start, end] = lineSpan(text, node.start, node.end);
        plainCalls.add(call);
        out.push({ name: titles.concat(t).join(' '), start, end, plain: true, ...printed(call) });
      }
    }
  };
  plainWalk(ast.program.body, []);
  walk(ast.program, (n) => {
    if (n.type === 'CallExpression' && !plainCalls.has(n) && isCase(n.callee) && callback(n)) {
      out.push({ name: null, start: n.start, end: n.end, plain: false, ...printed(n) });
    }
  });
  return out;
}

const result = {};
for (const [file, text] of Object.entries(input.files)) result[file] = cases(text, file);
process.stdout.write(JSON.stringify(result));

// The plain test cases of test files, found on the syntax tree (@babel/parser, the sandbox
// runner's own locked copy): what `etai suite build` may hold out of a session. Reads
// {parser, files: {path: text}} on stdin, writes {path: [{name, start, end}]} on stdout: each
// `test(...)` / `it(...)` statement whose title is a plain string, inside plain `describe(...)`
// blocks only, with Jest's full name (the describe titles and its own, joined by spaces) and the
// span of its whole lines. Anything else (each, dynamic titles, cases built in loops or helpers) is
// left out: such a case cannot be cut out of its file by text. Only parses: no project code runs.
'use strict';

const input = JSON.parse(require('fs').readFileSync(0, 'utf8'));
const { parse } = require(input.parser);

const tryParse = require('./parse-source')(parse);

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
  const walk = (body, titles) => {
    for (const node of body) {
      const call = callee(node);
      if (!call) continue;
      const name = call.callee.name;
      const t = title(call.arguments[0]);
      if (t === null) continue;
      if (name === 'describe') {
        const fn = call.arguments[1];
        if (fn && (fn.type === 'ArrowFunctionExpression' || fn.type === 'FunctionExpression') && fn.body.type === 'BlockStatement') {
          walk(fn.body.body, titles.concat(t));
        }
      } else if (name === 'test' || name === 'it') {
        const [start, end] = lineSpan(text, node.start, node.end);
        out.push({ name: titles.concat(t).join(' '), start, end });
      }
    }
  };
  walk(ast.program.body, []);
  return out;
}

const result = {};
for (const [file, text] of Object.entries(input.files)) result[file] = cases(text, file);
process.stdout.write(JSON.stringify(result));

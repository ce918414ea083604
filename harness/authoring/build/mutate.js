// Candidate mutants of a project's source files, found on the syntax tree (@babel/parser, the
// sandbox runner's own locked copy). Reads {parser, files: {path: text}} on stdin, writes a JSON
// list of {file, start, end, new, operator, line, column, fn, parses} on stdout. Only parses the
// project's text: no project code is loaded or run. Each mutant is one replaced span, so the
// session's patch and its reference fix are small edits of the real code.
'use strict';

const input = JSON.parse(require('fs').readFileSync(0, 'utf8'));
const { parse } = require(input.parser);

const DATE_GETTERS = ['FullYear', 'Month', 'Date', 'Day', 'Hours', 'Minutes', 'Seconds', 'Milliseconds'];
const DATE_METHODS = new Set([].concat(...DATE_GETTERS.map((n) => [`get${n}`, `set${n}`])));
const SLICERS = new Set(['slice', 'substring', 'substr', 'splice']);
const ESCAPABLE = '.+*?()[]{}|/$^';

const tryParse = require('../../grading/js/parse-source')(parse);

function keyName(k) {
  if (!k) return null;
  if (k.type === 'Identifier') return k.name;
  if (k.type === 'StringLiteral') return k.value;
  return null;
}

function candidates(text, file) {
  const ast = tryParse(text, file);
  if (!ast) return [];
  const out = [];
  const src = (n) => text.slice(n.start, n.end);
  const add = (n, start, end, repl, operator, fn) => {
    if (repl === text.slice(start, end)) return;
    out.push({ file, start, end, new: repl, operator, fn, line: n.loc.start.line, column: n.loc.start.column + 1 });
  };
  // The operator token between two operands (skipping comments is not needed for one token).
  const opSpan = (left, right, op) => {
    const between = text.slice(left.end, right.start);
    const i = between.indexOf(op);
    return i < 0 ? null : [left.end + i, left.end + i + op.length];
  };
  const swapOp = (n, from, to, operator, fn) => {
    const s = opSpan(n.left, n.right, from);
    if (s) add(n, s[0], s[1], to, operator, fn);
  };

  function visit(n, fn, parent) {
    if (!n || typeof n.type !== 'string') return;
    let here = fn;
    if (/Function|Method/.test(n.type)) {
      here = keyName(n.id) || keyName(n.key) || (parent && parent.type === 'VariableDeclarator' && keyName(parent.id))
        || (parent && /Property$/.test(parent.type) && keyName(parent.key)) || fn || '(anonymous)';
    }
    switch (n.type) {
      case 'IfStatement': case 'ConditionalExpression': case 'WhileStatement': case 'DoWhileStatement': {
        const t = n.test;
        if (t.type === 'UnaryExpression' && t.operator === '!') add(t, t.start, t.end, src(t.argument), 'negate_condition', here);
        else add(t, t.start, t.end, `!(${src(t)})`, 'negate_condition', here);
        break;
      }
      case 'LogicalExpression': {
        if (n.operator === '&&' || n.operator === '||') swapOp(n, n.operator, n.operator === '&&' ? '||' : '&&', 'flip_logical', here);
        // `a && a.b`: the guard before a property read, dropped.
        if (n.operator === '&&' && src(n.right).startsWith(src(n.left) + '.')) add(n, n.start, n.end, src(n.right), 'drop_null_guard', here);
        break;
      }
      case 'BinaryExpression': {
        const flips = { '<': '<=', '<=': '<', '>': '>=', '>=': '>' };
        if (flips[n.operator]) swapOp(n, n.operator, flips[n.operator], 'boundary', here);
        if (n.operator === '===' || n.operator === '!==') {
          swapOp(n, n.operator, n.operator === '===' ? '==' : '!=', 'strict_equality', here);
          swapOp(n, n.operator, n.operator === '===' ? '!==' : '===', 'negate_equality', here);
        }
        if ((n.operator === '+' || n.operator === '-') && n.right.type === 'NumericLiteral' && n.right.value === 1) {
          const month = /get(UTC)?Month\(\)|month/i.test(src(n.left));
          add(n, n.start, n.end, src(n.left), month ? 'month_index' : 'off_by_one', here);
        }
        break;
      }
      case 'ForStatement': {
        const t = n.test;
        if (t && t.type === 'BinaryExpression' && (t.operator === '<' || t.operator === '<=')) {
          add(t.right, t.right.start, t.right.end, `${src(t.right)} - 1`, 'loop_bound', here);
        }
        break;
      }
      case 'AwaitExpression':
        add(n, n.start, n.end, src(n.argument), 'remove_await', here);
        break;
      case 'CallExpression': case 'OptionalCallExpression': {
        const a = n.arguments;
        const callee = n.callee;
        const prop = callee && /MemberExpression$/.test(callee.type) && !callee.computed ? keyName(callee.property) : null;
        if (a.length >= 2 && !a.slice(0, 2).some((x) => x.type === 'SpreadElement') && src(a[0]) !== src(a[1])) {
          add(n, a[0].start, a[1].end, `${src(a[1])}${text.slice(a[0].end, a[1].start)}${src(a[0])}`, 'swap_arguments', here);
        }
        if (prop && SLICERS.has(prop) && a.length >= 1 && a[0].type === 'NumericLiteral') {
          add(a[0], a[0].start, a[0].end, String(a[0].value + 1), 'off_by_one', here);
        }
        if (prop === 'slice' && a.length === 0) add(n, n.start, n.end, src(callee.object), 'mutate_in_place', here);
        if (prop && DATE_METHODS.has(prop.replace('UTC', ''))) {
          const other = prop.includes('UTC') ? prop.replace('UTC', '') : prop.replace(/^(get|set)/, '$1UTC');
          add(callee.property, callee.property.start, callee.property.end, other, 'date_utc', here);
        }
        if (callee.type === 'MemberExpression' && src(callee) === 'Object.assign' && a.length >= 2
            && a[0].type === 'ObjectExpression' && a[0].properties.length === 0) {
          add(n, a[0].start, a[1].start, '', 'mutate_in_place', here);
        }
        break;
      }
      case 'ObjectExpression': {
        const p = n.properties;
        if (p.length >= 2 && p[0].type === 'SpreadElement') {
          const rest = text.slice(p[1].start, p[p.length - 1].end);
          add(n, n.start, n.end, `Object.assign(${src(p[0].argument)}, { ${rest} })`, 'mutate_in_place', here);
        }
        break;
      }
      case 'ArrayExpression':
        if (n.elements.length === 1 && n.elements[0] && n.elements[0].type === 'SpreadElement') {
          add(n, n.start, n.end, src(n.elements[0].argument), 'mutate_in_place', here);
        }
        break;
      case 'AssignmentPattern': {
        const r = n.right;
        let v = null;
        if (r.type === 'NumericLiteral') v = String(r.value + 1);
        else if (r.type === 'BooleanLiteral') v = String(!r.value);
        else if (r.type === 'StringLiteral') v = r.value ? "''" : "' '";
        else if (r.type === 'ObjectExpression' || r.type === 'ArrayExpression') v = 'undefined';
        if (v !== null) add(r, r.start, r.end, v, 'wrong_default', here);
        break;
      }
      case 'ReturnStatement':
        if (n.argument) add(n, n.start, n.end, `${src(n.argument)};`, 'drop_return', here);
        break;
      case 'ThrowStatement':
        add(n, n.start, n.end, '{}', 'swallow_error', here);
        break;
      case 'RegExpLiteral': {
        const pat = n.pattern;
        const body = (p) => `/${p}/${n.flags}`;
        if (pat.startsWith('^')) add(n, n.start, n.end, body(pat.slice(1)), 'regex_anchor', here);
        if (pat.endsWith('$') && !pat.endsWith('\\$')) add(n, n.start, n.end, body(pat.slice(0, -1)), 'regex_anchor', here);
        const m = /\\([.+*?()[\]{}|/$^])/.exec(pat);
        if (m && ESCAPABLE.includes(m[1])) add(n, n.start, n.end, body(pat.slice(0, m.index) + pat.slice(m.index + 1)), 'regex_escape', here);
        break;
      }
      case 'ExportNamedDeclaration':
        if (!n.declaration && n.specifiers.length >= 2) {
          for (let i = 0; i < n.specifiers.length; i++) {
            const s = n.specifiers[i];
            const next = n.specifiers[i + 1];
            add(s, s.start, next ? next.start : s.end, '', 'wrong_export', here);
          }
        }
        break;
      case 'AssignmentExpression': {
        const l = n.left;
        if (src(l) === 'module.exports' && n.right.type === 'ObjectExpression' && n.right.properties.length >= 2) {
          const ps = n.right.properties;
          for (let i = 0; i < ps.length; i++) {
            add(ps[i], ps[i].start, i + 1 < ps.length ? ps[i + 1].start : ps[i].end, '', 'wrong_export', here);
          }
        } else if (l.type === 'MemberExpression' && /^(module\.)?exports$/.test(src(l.object)) && !l.computed) {
          add(l.property, l.property.start, l.property.end, `${keyName(l.property)}_`, 'wrong_export', here);
        }
        break;
      }
      default:
    }
    for (const key of Object.keys(n)) {
      if (key === 'loc' || key === 'leadingComments' || key === 'trailingComments' || key === 'innerComments') continue;
      const v = n[key];
      if (Array.isArray(v)) for (const c of v) visit(c, here, n);
      else if (v && typeof v.type === 'string') visit(v, here, n);
    }
  }
  visit(ast.program, null, null);
  for (const c of out) {
    c.parses = tryParse(text.slice(0, c.start) + c.new + text.slice(c.end), file) !== null;
  }
  return out;
}

const all = [];
for (const [file, text] of Object.entries(input.files)) all.push(...candidates(text, file));
process.stdout.write(JSON.stringify(all));

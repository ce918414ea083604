// Test support code outside the places tests are named by (guard.js isProtected): a helper that
// makes the tests' assertions (`src/check.js` with `expect(a).toBe(b)`, imported by
// `src/sum.spec.js`) is the tests' own code wherever it sits, and an agent that rewrote it to
// assert nothing would pass every test that calls it, held-out ones included. Found on the pristine
// workspace at the listing (jest-host.js listTests) from Jest's own dependency graph, and protected
// from then on like the test files (runner.js init, verify.py take_baseline).
//
// Test-only modules: those that only test files, config-named files and other test-only modules
// load. That alone does not tell a helper: only the tests load a package's entry, and so every
// source the entry loads. A test-only module is support when it
//   - calls Jest's test API (expect, jest, describe, the hooks; `test('name'`, `it.each(`) or
//     imports it (`@jest/globals`, `expect`),
//   - loads an assertion library (assert, chai) and only tests and support load it, or
//   - loads a support module (a helper that hands the assertion on: what a source may not load,
//     guard.js).
// A helper that asserts nothing (a table of cases, a factory of inputs) is not found this way; a
// source only the tests load that loads `assert` itself is taken for a helper, and an edit of it
// is then refused, never passed: README "What grading resists".
'use strict';

const fs = require('fs');
const path = require('path');
const { jestModule } = require('./jest-warm');

// A free call (no `.` before the name: not `re.test(s)`), member chains included (`jest.fn(`,
// `describe.each(`). `test` and `it` are common names for a predicate or an iterator: only a call
// with a name (`test('adds'`) or through one of Jest's members counts. A name the module declares
// itself (`function expect(`, `const jest =`) is its own.
const CALL = /(?:^|[^.\w$])(expect|jest|describe|beforeEach|afterEach|beforeAll|afterAll)\s*(?:\.\s*[\w$]+\s*)*\(|(?:^|[^.\w$])(test|it)\s*(?:\(\s*['"`]|\.\s*(?:each|only|skip|todo|concurrent|failing)\b)/g;
const OWN = /(?:function\s*\*?\s*|(?:const|let|var|class)\s+)(expect|jest|describe|test|it|beforeEach|afterEach|beforeAll|afterAll)\b/g;
const JEST_API = /(?:require\s*\(|from\s+|import\s*\(?)\s*['"](?:@jest\/globals|expect)['"]/;
const ASSERT_LIBRARY = /(?:require\s*\(|from\s+|import\s*\(?)\s*['"](?:chai|(?:node:)?assert(?:\/strict)?)['"]/;

// 'jest' (the test API), 'assert' (an assertion library only), or null.
function testApi(text) {
  if (JEST_API.test(text)) return 'jest';
  const own = new Set([...text.matchAll(OWN)].map((m) => m[1]));
  if ([...text.matchAll(CALL)].some((m) => !own.has(m[1] || m[2]))) return 'jest';
  return ASSERT_LIBRARY.test(text) ? 'assert' : null;
}

function read(file) {
  try { return fs.readFileSync(file, 'utf8'); } catch (e) { return ''; }
}

// `roots`: test files and config-named files (absolute); `configs`: the project configs Jest read.
// Returns workspace paths, sorted.
async function supportFiles(jest, ws, configs, roots) {
  const Runtime = jestModule(jest, 'jest-runtime', 'build/index.js').default;
  const { DependencyResolver } = jestModule(jest, 'jest-resolve-dependencies', 'build/index.js');
  // (The package's exports map hides its default extractor: loaded by its file.)
  const { extractor } = jestModule(jest, 'jest-haste-map', 'build/lib/dependencyExtractor.js');
  const inWs = (f) => { const r = path.relative(ws, f); return !!r && !r.startsWith('..') && !path.isAbsolute(r) && !r.split(path.sep).includes('node_modules'); };
  const isRoot = new Set(roots);
  const loads = new Map(); // workspace module -> the workspace modules it loads
  const loadedBy = new Map();
  for (const config of configs) {
    const ctx = await Runtime.createContext(config, { maxWorkers: 1, watchman: false });
    const graph = new DependencyResolver(ctx.resolver, ctx.hasteFS, null);
    // A module outside the haste map (beyond the config's `roots`) by Jest's own extractor and
    // resolver: a helper folder beside `src` when `roots` names `src` alone.
    const depsOf = (file) => {
      if (ctx.hasteFS.exists(file)) return graph.resolve(file);
      const out = [];
      for (const d of extractor.extract(read(file))) {
        if (ctx.resolver.isCoreModule(d)) continue;
        try { out.push(ctx.resolver.resolveModule(file, d)); } catch (e) { /* not found: not followed */ }
      }
      return out;
    };
    const todo = [...roots, ...ctx.hasteFS.getAbsoluteFileIterator()];
    while (todo.length) {
      const file = todo.pop();
      if (!inWs(file) || loads.has(file)) continue;
      const deps = [...new Set(depsOf(file).filter(inWs))];
      loads.set(file, deps);
      for (const d of deps) {
        if (!loadedBy.has(d)) loadedBy.set(d, new Set());
        loadedBy.get(d).add(file);
        if (!loads.has(d)) todo.push(d);
      }
    }
  }
  // Test-only: what the tests reach, less (repeatedly) whatever a module outside the set loads.
  const only = new Set();
  const reach = [...isRoot];
  while (reach.length) {
    for (const d of loads.get(reach.pop()) || []) if (!isRoot.has(d) && !only.has(d)) { only.add(d); reach.push(d); }
  }
  const loadedOnlyBy = (m, set) => [...(loadedBy.get(m) || [])].every((b) => isRoot.has(b) || set.has(b));
  for (let shrank = true; shrank;) {
    shrank = false;
    for (const m of only) if (!loadedOnlyBy(m, only)) { only.delete(m); shrank = true; }
  }
  const api = new Map([...only].map((m) => [m, testApi(read(m))]));
  const support = new Set();
  for (let grew = true; grew;) {
    grew = false;
    for (const m of only) {
      if (support.has(m)) continue;
      const kind = api.get(m);
      if (kind === 'jest' || (kind === 'assert' && loadedOnlyBy(m, support))
        || (loads.get(m) || []).some((d) => support.has(d))) {
        support.add(m);
        grew = true;
      }
    }
  }
  return [...support].map((f) => path.relative(ws, f)).sort();
}

module.exports = { supportFiles, testApi };

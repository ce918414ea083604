// Test support code outside the places tests are named by (guard.js isProtected): a helper that
// makes the tests' assertions (`src/check.js` with `expect(a).toBe(b)`, imported by
// `src/sum.spec.js`) is the tests' own code wherever it sits, and an agent that rewrote it to
// assert nothing would pass every test that calls it, held-out ones included. Found on the pristine
// workspace at the listing (jest-host.js listTests) from Jest's own dependency graph, and protected
// from then on like the test files (runner.js init, verify.py take_baseline).
//
// A module is support when it uses the test API (a Jest global called: expect, describe, it, test,
// jest, the hooks; or an assertion library loaded) and only test files, config-named files and
// other support modules load it. A module any source loads is source, however it is written; a
// source only the tests load that loads `assert` itself (a package entry checking its arguments)
// is taken for a helper, and an edit of it is then refused, never passed. A helper that asserts
// nothing (a table of cases, a factory of inputs) is not found this way: README "What grading
// resists".
'use strict';

const fs = require('fs');
const path = require('path');

const GLOBALS = 'expect|describe|it|test|jest|beforeEach|afterEach|beforeAll|afterAll';
// A free call (not `re.test(s)`: no `.` before the name), through member chains (`describe.each(`,
// `jest.fn(`); a name the module declares itself (`function test(`, `const it =`) is its own.
const CALL = new RegExp(`(?:^|[^.\\w$])(${GLOBALS})\\s*(?:\\.\\s*[\\w$]+\\s*)*\\(`, 'g');
const OWN = new RegExp(`(?:function\\s*\\*?\\s*|(?:const|let|var)\\s+)(${GLOBALS})\\b`, 'g');
const LIBRARY = /(?:require\s*\(|from\s+|import\s*\(?)\s*['"](?:@jest\/globals|expect|chai|(?:node:)?assert(?:\/strict)?)['"]/;

function usesTestApi(text) {
  if (LIBRARY.test(text)) return true;
  const own = new Set([...text.matchAll(OWN)].map((m) => m[1]));
  return [...text.matchAll(CALL)].some((m) => !own.has(m[1]));
}

function read(file) {
  try { return fs.readFileSync(file, 'utf8'); } catch (e) { return ''; }
}

// `roots`: test files and config-named files (absolute); `configs`: the project configs Jest read.
// Returns workspace paths, sorted.
async function supportFiles(jest, ws, configs, roots) {
  const Runtime = require(require.resolve('jest-runtime', { paths: [jest] })).default;
  const { DependencyResolver } = require(require.resolve('jest-resolve-dependencies', { paths: [jest] }));
  const inWs = (f) => { const r = path.relative(ws, f); return !!r && !r.startsWith('..') && !path.isAbsolute(r) && !r.split(path.sep).includes('node_modules'); };
  const isRoot = new Set(roots);
  const loadedBy = new Map(); // workspace module -> the workspace modules that load it
  const seen = new Set();
  for (const config of configs) {
    const ctx = await Runtime.createContext(config, { maxWorkers: 1, watchman: false });
    const graph = new DependencyResolver(ctx.resolver, ctx.hasteFS, null);
    for (const file of ctx.hasteFS.getAbsoluteFileIterator()) {
      if (!inWs(file) || seen.has(file)) continue;
      seen.add(file);
      for (const d of graph.resolve(file).filter(inWs)) { if (!loadedBy.has(d)) loadedBy.set(d, new Set()); loadedBy.get(d).add(file); }
    }
  }
  // The least set closed under: a module that uses the test API, every loader of which is a
  // root or already in the set. (Only tests load the package's entry, so "only tests load it"
  // alone would take in every source the entry loads: the test API is what tells a helper.)
  const support = new Set();
  const api = new Map();
  const asserts = (m) => { if (!api.has(m)) api.set(m, usesTestApi(read(m))); return api.get(m); };
  for (let grew = true; grew;) {
    grew = false;
    for (const [m, by] of loadedBy) {
      if (support.has(m) || isRoot.has(m) || ![...by].every((b) => isRoot.has(b) || support.has(b))) continue;
      if (!asserts(m)) continue;
      support.add(m);
      grew = true;
    }
  }
  return [...support].map((f) => path.relative(ws, f)).sort();
}

module.exports = { supportFiles, usesTestApi };

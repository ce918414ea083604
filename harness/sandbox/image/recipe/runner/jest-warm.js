// What a warm Jest host keeps from one run to the next.
//
// Jest starts every run, and every test file in it, from nothing: it re-reads, re-resolves and
// re-compiles its own framework (jest-circus, expect, jest-snapshot and their ~200 modules) into
// each test file's fresh context. That is right for the workspace, which an agent edits between
// runs, and needless for the Jest install itself, which lies on the image's read-only root and
// never changes (the `local` sandbox runs the copy in ~/.cache/etai, which nothing writes). So each
// patch below keeps answers about paths inside the Jest install, and only those, for the life of
// the host. Test isolation is kept: every test file still gets a fresh context and fresh instances
// of expect, the circus state and every module a test can reach; what is shared is file text,
// resolution answers, compiled (not yet run) code, and two pure libraries no test sees (patch 6).
// tests/harness/test_sandbox_conformance.py checks that isolation. Measured on the 5-file bench
// project, one host, interleaved A/B in one process on a 2-core machine: p50 190 -> 93 ms a run
// for patches 1-5, and a further 117 -> 94 ms for patch 6.
//
// The patches reach into Jest 29.7's build files (pinned by the lockfile); a Jest upgrade must
// re-check them, and the sandbox tests fail if a patched name disappears.
'use strict';

const Module = require('module');
const path = require('path');
const codeCache = require('./code-cache');

function jestModule(jest, pkg, file) {
  const dir = path.dirname(require.resolve(`${pkg}/package.json`, { paths: [jest] }));
  return require(path.join(dir, file));
}

function replace(obj, name, make) {
  const original = obj[name];
  if (typeof original !== 'function') throw new Error(`jest-warm: ${name} is gone; re-check the patches`);
  obj[name] = make(original);
}

// A failure message must read as it would without these patches: Jest points its code frame at the
// first stack frame outside node_modules, which would otherwise be a wrapper in this file (or, for
// guard.js, which uses these too, in the guard's files).
function unframed(e, files = []) {
  const drop = files.concat(__filename);
  if (e && typeof e.stack === 'string' && drop.some((f) => e.stack.includes(f))) {
    e.stack = e.stack.split('\n').filter((line) => !drop.some((f) => line.includes(f))).join('\n');
  }
  return e;
}

function through(original, self, args, files) {
  try {
    return original.apply(self, args);
  } catch (e) {
    throw unframed(e, files);
  }
}

function memoized(original, keep) {
  const memo = new Map();
  return function (p) {
    if (!keep(p)) return through(original, this, arguments);
    if (!memo.has(p)) memo.set(p, through(original, this, arguments));
    return memo.get(p);
  };
}

// Whether a file lies inside the Jest install (real path: module file names are real paths, and
// the install may be reached through a link).
function inside(jest) {
  const install = require('fs').realpathSync(path.resolve(jest, '..')) + path.sep;
  return (p) => typeof p === 'string' && p.startsWith(install);
}

// A build file of the Jest install loaded with `edits` ([from, to] pairs, each `from` found exactly
// once) in place of its text on disk, ahead of any require of it (guard.js, sealed.js).
function amend(jest, pkg, file, edits, who) {
  const full = path.join(path.dirname(require.resolve(`${pkg}/package.json`, { paths: [jest] })), file);
  let text = require('fs').readFileSync(full, 'utf8');
  for (const [from, to] of edits) {
    if (text.split(from).length !== 2) throw new Error(`${who}: ${full} changed; re-check the amendments`);
    text = text.replace(from, () => to);
  }
  const m = new Module(full, null);
  m.filename = full;
  m.paths = Module._nodeModulePaths(path.dirname(full));
  m._compile(text, full);
  m.loaded = true;
  require.cache[full] = m;
}

module.exports = warm;
module.exports.amend = amend;
module.exports.through = through;
module.exports.unframed = unframed;
module.exports.inside = inside;
module.exports.jestModule = jestModule;

function warm(jest) {
  const inJest = inside(jest);

  // 1. File system answers of the resolver (Jest forgets them at the start of every run): 7-10%.
  const walkers = jestModule(jest, 'jest-resolve', 'build/fileWalkers.js');
  for (const name of ['isFile', 'isDirectory', 'realpathSync', 'readPackageCached']) {
    replace(walkers, name, (original) => memoized(original, inJest));
  }

  // 2. Node resolution from a directory inside the install to a file inside it. Only Jest's own
  //    resolver, and only when nothing the config adds (modulePaths, moduleDirectories, conditions)
  //    differs: they are part of the key. moduleNameMapper and mocks act before this, per run.
  const Resolver = jestModule(jest, 'jest-resolve', 'build/resolver.js').default;
  replace(Resolver, 'findNodeModule', (original) => {
    const memo = new Map();
    return function (request, options) {
      if (options.resolver || options.throwIfNotFound || !inJest(options.basedir)) return through(original, this, arguments);
      const key = JSON.stringify([request, options.basedir, options.conditions, options.extensions,
        options.moduleDirectory, options.paths, options.rootDir]);
      let found = memo.get(key);
      if (found === undefined) {
        found = through(original, this, arguments);
        if (inJest(found)) memo.set(key, found);
      }
      return found;
    };
  });

  // 3. Module text: each test file has its own read cache, so every file re-read the framework.
  const Runtime = jestModule(jest, 'jest-runtime', 'build/index.js').default;
  for (const name of ['readFile', 'readFileBuffer']) {
    replace(Runtime.prototype, name, (original) => memoized(original, inJest));
  }

  // 4. Compiled code: a vm.Script may run in any number of contexts, so the framework is compiled
  //    once, not once per test file (V8's own cache loses these scripts to GC between files). A
  //    cached script has no dynamic-import hook (which would pin the first runtime); a file that
  //    uses import() keeps Jest's own path.
  replace(Runtime.prototype, 'createScriptFromCode', (original) => {
    const scripts = new Map();
    return function (source, filename) {
      if (!inJest(filename)) return through(original, this, arguments);
      // The wrapper's head depends only on the config; the (memoized) source is the same string.
      const head = this.constructModuleWrapperStart();
      const hit = scripts.get(filename);
      if (hit && hit.source === source && hit.head === head) return hit.script;
      if (source.includes('import(')) return through(original, this, arguments);
      const script = codeCache.script('jest', filename, this.wrapCodeInModuleWrapper(source));
      scripts.set(filename, { source, head, script });
      return script;
    };
  });

  // 5. Jest makes a Node require function for every require inside its framework (to check for the
  //    few modules it loads outside the sandbox); one per requiring file is enough.
  replace(Module, 'createRequire', (original) => memoized(original, inJest));

  // 6. Jest already loads chalk for its framework outside the test context, once per process. Two
  //    more pure libraries qualify, each used in one place and never handed a test's values:
  //    semver (jest-snapshot compares prettier's version string) and pure-rand (jest-circus
  //    shuffles with a seed). Building semver's ~40 regexps per test file was ~10% of a run. A
  //    moduleNameMapper that matches either name still gets to map it, as in stock Jest.
  const OUTSIDE = new Set(['semver', 'pure-rand']);
  replace(Runtime.prototype, 'requireInternalModule', (original) => function (from, to) {
    if (OUTSIDE.has(to) && inJest(from)
        && !(this._config.moduleNameMapper || []).some(([re]) => new RegExp(re).test(to))) {
      return Module.createRequire(from)(to);
    }
    return through(original, this, arguments);
  });
}

// V8's compiled code for the Jest install's own modules, made when the image is built
// (code-cache-build.js) and only read after (docs/sandbox.md#code-cache).
//
// A new Jest host compiles Jest, babel-jest and the framework before its first run: about a fifth
// of its start. V8 can take that code from a cache instead (vm.Script's `cachedData`), which is
// what Node 22's module compile cache does; Node 20, the image's, has no such cache, so a module
// here gives one to Node's loader (Module.prototype._compile) and to jest-warm.js's compiled
// framework scripts, for files inside the Jest install and nothing else.
//
// Trust: compiled code runs as it is, so the cache must never be written by anything a test can
// reach. It lies on the image's read-only root, made as root by the image build from the template
// project alone; a host only reads it. An entry's name is the SHA-256 of its kind, file name and
// full source text, so a file that changed never finds an entry made from other text (V8 checks
// only the source's length); V8 refuses an entry made by another V8 or under other flags (the heap
// limit is one: hence a folder per set of flags).
'use strict';

const Module = require('module');
const vm = require('vm');
const fs = require('fs');
const path = require('path');
const crypto = require('crypto');

const stats = { hits: 0, rejected: 0, misses: 0 };
let folder = null; // where this process reads, or null: no cache
let made = null; // [name, script] to write (the image build only)

// The folder of one set of V8 flags, e.g. `max-old-space-size=614`, or `default` without any.
function flagsFolder(execArgv) {
  const key = execArgv.map((a) => a.replace(/^-+/, '')).join('_').replace(/[^A-Za-z0-9=._-]/g, '_');
  return key || 'default';
}

function entryName(kind, filename, source) {
  return crypto.createHash('sha256').update(`${kind}\0${filename}\0`).update(source).digest('hex');
}

// A vm.Script of `source` (already wrapped), with its cached code where there is an entry.
function script(kind, filename, source) {
  if (!folder) return new vm.Script(source, { displayErrors: true, filename });
  const name = entryName(kind, filename, source);
  let cachedData;
  if (!made) {
    try { cachedData = fs.readFileSync(path.join(folder, name)); } catch (e) { stats.misses++; }
  }
  const s = new vm.Script(source, { displayErrors: true, filename, cachedData });
  if (cachedData) stats[s.cachedDataRejected ? 'rejected' : 'hits']++;
  if (made) made.push([name, s]);
  return s;
}

// Node's loader compiles a module as a function with an import() hook; a script from here has none,
// so a file that uses import(), or starts with a hashbang (not valid after the wrapper's head), or
// that V8 refuses to parse, keeps Node's own path. What the function is handed is what Node's own
// loader gives a module (its makeRequireFunction): require with resolve, paths, main, extensions, cache.
function hookLoader(inside) {
  const compile = Module.prototype._compile;
  Module.prototype._compile = function (content, filename, format) {
    if (!inside(filename) || (format && format !== 'commonjs') || content.startsWith('#!') || content.includes('import(')) {
      return compile.apply(this, arguments);
    }
    let fn;
    try {
      fn = script('node', filename, Module.wrap(content)).runInThisContext({ displayErrors: true });
    } catch (e) {
      return compile.apply(this, arguments);
    }
    const mod = this;
    const require = function require(id) { return mod.require(id); };
    require.resolve = (request, options) => Module._resolveFilename(request, mod, false, options);
    require.resolve.paths = (request) => Module._resolveLookupPaths(request, mod);
    require.main = process.mainModule;
    require.extensions = Module._extensions;
    require.cache = Module._cache;
    return Reflect.apply(fn, mod.exports, [mod.exports, require, mod, filename, path.dirname(filename)]);
  };
}

// `root`: the cache (ETAI_CODE_CACHE); `inside(file)`: whether a file belongs to the Jest install;
// `write`: the image build's run, which keeps every script to write them out (writeAll).
function install(root, inside, { write = false } = {}) {
  if (!root) return;
  folder = path.join(root, flagsFolder(process.execArgv));
  if (write) made = [];
  else if (!fs.existsSync(folder)) { folder = null; return; }
  hookLoader(inside);
}

// Code made after a script ran holds the functions it compiled on the way, not only the top level.
function writeAll() {
  fs.mkdirSync(folder, { recursive: true, mode: 0o755 });
  let bytes = 0;
  for (const [name, s] of made) {
    const data = s.createCachedData();
    fs.writeFileSync(path.join(folder, name), data, { mode: 0o644 });
    bytes += data.length;
  }
  return { folder, entries: made.length, bytes };
}

// The flags runner.js's zygote adds to a host's (V8 single-threaded: its background tasks would go
// to worker threads that a forked child does not have). The image build makes a folder for them too.
const ZYGOTE_FLAGS = Object.freeze(['--single-threaded']);

module.exports = { install, script, writeAll, flagsFolder, entryName, ZYGOTE_FLAGS, stats: () => Object.assign({ folder }, stats) };

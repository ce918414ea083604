// The trusted transform cache (docs/transform-cache.md): a host reads transformed code only from a
// store the sandbox user cannot write, and only under a key over everything the transform depends on.
//
// A graded run's hosts never read Jest's own cache (workspace code can write it), so every fresh
// host transforms the project again: Babel on every file a test loads, most of a run on a real
// project. The store holds what hosts of a trusted sandbox (a preflight: only the suite's own code
// has run there) transformed; the harness copies it out of that sandbox and gives it to every later
// one read-only (harness/sandbox/transforms.py). Every host writes what it transforms to
// ETAI_TRANSFORM_OUT; what is copied out of anything but a preflight is never used.
//
// Only babel-jest's transforms are stored: its inputs are the file, Babel's config chain, its
// options, its own code and versions and two environment variables, all in the key (`trustedKey`).
// A type-checking transformer (ts-jest) reads the whole program it checks, which no cheap key
// names; any other transformer's inputs are not known: neither is stored.
//
// An entry's name is an HMAC of the key under the file's token: a secret the harness derived on
// its side from the file's path and pristine content (transforms.py `file_keys`), handed to this
// host by the runner over its request (`setKeys`). A sandbox can name only entries of files its own
// session holds, never another session's (which may hold this session's original or its fix).
'use strict';

const fs = require('fs');
const path = require('path');
const { createHash, createHmac } = require('crypto');

// Pinned at load, before any workspace code runs in this process.
const { readFileSync, writeFileSync, renameSync, mkdirSync, statSync, realpathSync, readdirSync } = fs;
const { stringify } = JSON;
const WS = path.resolve(process.env.ETAI_WORKSPACE || '/scratch/ws') + path.sep;
const VOLATILE = ['cache', 'cacheDirectory', 'roots'];
const BABEL_JEST = /[\\/]node_modules[\\/]babel-jest[\\/]/;
const TOKEN = /^[0-9a-f]{64}$/;

const sha256 = (data) => createHash('sha256').update(data).digest('hex');
const underWs = (file) => file.startsWith(WS) && !file.includes(`${path.sep}node_modules${path.sep}`);

// JSON of what `options` holds as data (functions and cycles left out), keys sorted.
function stable(v, seen = new Set()) {
  if (v === null || typeof v !== 'object') return typeof v === 'function' || v === undefined ? 'null' : stringify(v);
  if (seen.has(v)) return 'null';
  seen.add(v);
  const out = Array.isArray(v) ? `[${v.map((x) => stable(x, seen)).join(',')}]`
    : `{${Object.keys(v).sort().map((k) => `${stringify(k)}:${stable(v[k], seen)}`).join(',')}}`;
  seen.delete(v);
  return out;
}

// Each workspace file's token (workspace-relative path -> 64 hex digits), as the runner passed them.
let tokens = new Map();
function setKeys(keys) {
  tokens = new Map(Object.entries(keys || {}).filter(([, v]) => typeof v === 'string' && TOKEN.test(v)));
}

// A file's content hash, once per path and size/mtime/inode; null for a file that is not there.
const hashes = new Map();
function fileHash(file) {
  let st;
  try { st = statSync(file); } catch (e) { return null; }
  if (!st.isFile()) return null;
  const sig = `${st.size}:${st.mtimeMs}:${st.ino}`;
  const seen = hashes.get(file);
  if (seen && seen.sig === sig) return seen.hash;
  const hash = sha256(readFileSync(file));
  hashes.set(file, { sig, hash });
  return hash;
}

// Workspace files this process has loaded (not its node_modules, which nobody can change): a Babel
// plugin or JavaScript config of the workspace, whose code Jest's key does not name.
// `keyLoads`: those files as the last key named them, to tell whether its transform loaded more.
let keyLoads = '';
function loadedWorkspaceFiles() {
  return Object.keys(require.cache).filter(underWs).sort().join('\n');
}
function loadedWorkspaceCode() {
  keyLoads = loadedWorkspaceFiles();
  return sha256(keyLoads.split('\n').map((f) => `${f}\0${fileHash(f) || 'gone'}`).join('\n'));
}

// Babel's config chain, over-approximated: every file Babel may take its configuration from
// (babel.config.*, .babelrc*, package.json and browserslist files), in every folder from the file's
// own, Jest's rootDir and cwd (Babel's `root` and `cwd`) up to the workspace's top. Babel reads a
// subset of these (it stops at a package's root); a change to any of them is a different key.
const CONFIG = /^(babel\.config\.[\w.]+|\.babelrc(\.[\w.]+)?|package\.json|\.browserslistrc|browserslist)$/;
const listed = new Map(); // folder -> { sig, names } of its config files
function configNames(dir) {
  let st;
  try { st = statSync(dir); } catch (e) { return []; }
  const sig = `${st.mtimeMs}:${st.ino}`;
  const seen = listed.get(dir);
  if (seen && seen.sig === sig) return seen.names;
  let names = [];
  try { names = readdirSync(dir).filter((n) => CONFIG.test(n)).sort(); } catch (e) { /* gone */ }
  listed.set(dir, { sig, names });
  return names;
}
function configChain(starts) {
  const dirs = new Set();
  for (let dir of starts) {
    if (typeof dir !== 'string') continue;
    dir = path.resolve(dir);
    while (`${dir}${path.sep}`.startsWith(WS) && !dirs.has(dir)) {
      dirs.add(dir);
      const up = path.dirname(dir);
      if (up === dir) break;
      dir = up;
    }
  }
  const parts = [];
  for (const dir of [...dirs].sort()) {
    for (const n of configNames(dir)) parts.push(`${path.join(dir, n)}\0${fileHash(path.join(dir, n)) || 'gone'}`);
  }
  return sha256(parts.join('\n'));
}

// The versions of babel-jest and of the Babel it runs, by where the transformer was loaded from.
const versions = new Map();
function transformerVersions(used) {
  if (versions.has(used)) return versions.get(used);
  const version = (name) => {
    try {
      return `${name}@${JSON.parse(readFileSync(require.resolve(`${name}/package.json`, { paths: [path.dirname(used)] }), 'utf8')).version}`;
    } catch (e) { return `${name}@?`; }
  };
  const v = `${used}\0${fileHash(used)}\0${version('babel-jest')}\0${version('@babel/core')}`;
  versions.set(used, v);
  return v;
}

// The transformer of `filename` if the store may hold its output (babel-jest), else null.
function storable(t, filename) {
  let used = null;
  try { used = t._getTransformPath(filename); } catch (e) { return null; }
  return typeof used === 'string' && BABEL_JEST.test(used) ? used : null;
}

const normalized = new WeakMap(); // a transformer's config -> its config without VOLATILE, as text
function trustedKey(transformer, proto, used, filename, content, options) {
  let norm = normalized.get(transformer._config);
  if (!norm) {
    const config = Object.assign({}, transformer._config);
    for (const k of VOLATILE) delete config[k];
    const string = stable(config);
    norm = { config, string, hash: sha256(string) };
    normalized.set(transformer._config, norm);
  }
  const view = Object.create(transformer, {
    _config: { value: norm.config },
    _cache: { value: Object.assign({}, transformer._cache, { configString: norm.string }) },
  });
  // Jest's key first: it makes the transformer load its configuration (and the workspace plugins
  // that names), which loadedWorkspaceCode then covers.
  const jestKey = proto._getCacheKey.call(view, content, filename, options);
  const { rootDir, cwd } = transformer._config;
  return sha256(stringify([process.version, filename, sha256(content), jestKey, stable(options), norm.hash,
    transformerVersions(used), configChain([path.dirname(filename), rootDir, cwd]),
    process.env.NODE_ENV || '', process.env.BABEL_ENV || '', loadedWorkspaceCode()]));
}

// The entry's name: the key under the file's token, or null for a file that has none (not a file
// of the pristine workspace as the harness sent it).
function entryName(filename, key) {
  const token = tokens.get(path.relative(WS, filename));
  return token ? createHmac('sha256', Buffer.from(token, 'hex')).update(key).digest('hex') : null;
}

function entryPath(store, key) {
  return path.join(store, key.slice(0, 2), key);
}

// The stored code, or null: an entry whose checksum does not match is not one.
function read(store, key) {
  let text;
  try { text = readFileSync(entryPath(store, key), 'utf8'); } catch (e) { return null; }
  const nl = text.indexOf('\n');
  const code = text.slice(nl + 1);
  if (nl !== 64 || sha256(code) !== text.slice(0, 64)) return null;
  let map = `${entryPath(store, key)}.map`;
  try { statSync(map); } catch (e) { map = null; }
  return { code, map };
}

function write(out, key, result) {
  try {
    mkdirSync(out, { recursive: true });
    const file = path.join(out, key);
    const tmp = `${file}.${process.pid}.tmp`;
    if (result.sourceMapPath) {
      writeFileSync(tmp, readFileSync(result.sourceMapPath));
      renameSync(tmp, `${file}.map`);
    }
    writeFileSync(tmp, `${sha256(result.code)}\n${result.code}`);
    renameSync(tmp, file);
  } catch (e) { /* a full scratch space: the store just gets nothing from this file */ }
}

// A sealed file (sealed.js) is transformed in memory only: Jest's own path writes every transform's
// code and source map (the test's text) to its cache folder, which the sandbox user can read, and
// so would this module's `write`. Without a map, its failures' stack frames keep transformed lines.
function sealedTransform(t, filepath, content, options) {
  const filename = realpathSync(filepath);
  const { transformer, transformerConfig = {} } = t._getTransformer(filename) || {};
  if (!transformer || !t.shouldTransform(filename)) return { code: content, originalCode: content, sourceMapPath: null };
  if (typeof transformer.process !== 'function') throw new Error(`etai sealed: the transformer of ${filepath} has no process()`);
  const processed = transformer.process(content, filename, Object.assign({}, options,
    { cacheFS: t._cacheFS, config: t._config, configString: t._cache.configString, transformerConfig }));
  return { code: typeof processed === 'string' ? processed : processed.code, originalCode: content, sourceMapPath: null };
}

// Transformers this host ran that are neither Jest's own nor babel-jest: such a transformer may keep
// what it read of other files between runs (ts-jest's type checker keeps every file it read: a
// test compiled against a source changed since fails as it did before the change), so runner.js
// starts a new host for the agent's next run after a change.
const stateful = new Set();
function noteTransformer(t, filepath, jest) {
  let used = null;
  try { used = t._getTransformPath(filepath); } catch (e) { return; }
  if (typeof used === 'string' && !used.startsWith(jest) && !/[\\/]node_modules[\\/]babel-jest[\\/]/.test(used)) stateful.add(used);
}

function patch(proto, store, out, sealed, jest) {
  const original = proto.transformSource;
  if (typeof original !== 'function' || typeof proto._getCacheKey !== 'function') {
    throw new Error('transform-cache: ScriptTransformer changed; re-check transform-cache.js');
  }
  proto.transformSource = function transformSource(filepath, content, options) {
    noteTransformer(this, filepath, jest);
    if (sealed(filepath)) return sealedTransform(this, filepath, content, options);
    let name = null;
    try {
      const real = realpathSync(filepath);
      const used = (store || out) && tokens.has(path.relative(WS, real)) ? storable(this, real) : null;
      if (used) name = entryName(real, trustedKey(this, proto, used, real, content, options));
    } catch (e) { name = null; } // Jest's own path below reports what is wrong with the file
    if (name && store) {
      const hit = read(store, name);
      if (hit) return { code: hit.code, originalCode: content, sourceMapPath: hit.map };
    }
    const result = original.apply(this, arguments);
    // Workspace code first loaded by this transform (a plugin's lazy require) is not in its key:
    // not written, and the next file's key names it.
    if (name && out && loadedWorkspaceFiles() === keyLoads) write(out, name, result);
    return result;
  };
}

// Every ScriptTransformer is made by createScriptTransformer (jest-runner, per test file): its
// class is not exported, so the prototype is patched when the first one is made.
module.exports = function install(jest, { store, out, sealed = () => false }) {
  const jestFiles = realpathSync(path.resolve(jest, '..')) + path.sep; // the Jest install's own files
  const runner = path.dirname(require.resolve('jest-runner/package.json', { paths: [jest] }));
  const dir = path.dirname(require.resolve('@jest/transform/package.json', { paths: [runner] }));
  const mod = require(path.join(dir, 'build', 'ScriptTransformer.js'));
  const create = mod.createScriptTransformer;
  let patched = null;
  mod.createScriptTransformer = async function createScriptTransformer(...args) {
    const t = await create.apply(this, args);
    const proto = Object.getPrototypeOf(t);
    if (patched !== proto) { patch(proto, store, out, sealed, jestFiles); patched = proto; }
    return t;
  };
};
// Whether a transformer of this host's runs may keep state between runs (`stateful`).
module.exports.keepsState = () => stateful.size > 0;
// The tokens of this session's files (runner.js passes them with a host's first request).
module.exports.setKeys = setKeys;

// The trusted transform cache (docs/transform-cache.md): a host reads transformed code only from a
// store the sandbox user cannot write, and only under a key over everything the transform depends on.
//
// A graded run's hosts never read Jest's own cache (workspace code can write it), so every fresh
// host transforms the project again: Babel or ts-jest on every file a test loads, most of a run on
// a real project. The store holds what hosts of a trusted sandbox (a preflight: only the suite's
// own code has run there) transformed; the harness copies it out of that sandbox and gives it to
// every later one read-only (harness/sandbox/transforms.py). Every host writes what it transforms
// to ETAI_TRANSFORM_OUT; what is copied out of anything but a preflight is never used.
//
// The key (`trustedKey`) is Jest's own cache key made over the project config without the three
// fields that say only where Jest looks and keeps its cache (they differ between hosts and runs),
// together with the file's path and content, the transform options, and the content of every
// workspace file loaded into this process (a Babel plugin or config of the workspace: Jest's key
// names such a plugin but not its code). A changed file, config or plugin is a different key: it is
// transformed here, in memory, as without the store.
'use strict';

const fs = require('fs');
const path = require('path');
const { createHash } = require('crypto');

// Pinned at load, before any workspace code runs in this process.
const { readFileSync, writeFileSync, renameSync, mkdirSync, statSync, realpathSync } = fs;
const { stringify } = JSON;
const WS = path.resolve(process.env.ETAI_WORKSPACE || '/scratch/ws') + path.sep;
const VOLATILE = ['cache', 'cacheDirectory', 'roots'];

const sha256 = (data) => createHash('sha256').update(data).digest('hex');

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

// Workspace files this process has loaded (not its node_modules, which nobody can change): the
// transformer's own inputs beyond the file. Hashed once per path and size/mtime.
const loadedHashes = new Map();
function loadedWorkspaceCode() {
  const parts = [];
  for (const file of Object.keys(require.cache).sort()) {
    if (!file.startsWith(WS) || file.includes(`${path.sep}node_modules${path.sep}`)) continue;
    let st;
    try { st = statSync(file); } catch (e) { parts.push(`${file}\0gone`); continue; }
    const seen = loadedHashes.get(file);
    const sig = `${st.size}:${st.mtimeMs}:${st.ino}`;
    if (!seen || seen.sig !== sig) loadedHashes.set(file, { sig, hash: sha256(readFileSync(file)) });
    parts.push(`${file}\0${loadedHashes.get(file).hash}`);
  }
  return sha256(parts.join('\n'));
}

const normalized = new WeakMap(); // a transformer's config -> its config without VOLATILE, as text
function trustedKey(transformer, proto, filename, content, options) {
  let norm = normalized.get(transformer._config);
  if (!norm) {
    const config = Object.assign({}, transformer._config);
    for (const k of VOLATILE) delete config[k];
    norm = { config, string: stable(config) };
    normalized.set(transformer._config, norm);
  }
  const view = Object.create(transformer, {
    _config: { value: norm.config },
    _cache: { value: Object.assign({}, transformer._cache, { configString: norm.string }) },
  });
  // Jest's key first: it makes the transformer load its configuration (and the workspace plugins
  // that names), which the last part then covers.
  const jestKey = proto._getCacheKey.call(view, content, filename, options);
  return sha256(stringify([process.version, filename, sha256(content), jestKey, stable(options), loadedWorkspaceCode()]));
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
    let key = null;
    try {
      const real = realpathSync(filepath);
      if ((store || out) && real.startsWith(WS)) key = trustedKey(this, proto, real, content, options);
    } catch (e) { key = null; } // Jest's own path below reports what is wrong with the file
    if (key && store) {
      const hit = read(store, key);
      if (hit) return { code: hit.code, originalCode: content, sourceMapPath: hit.map };
    }
    const result = original.apply(this, arguments);
    if (key && out) write(out, key, result);
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

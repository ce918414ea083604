// Grading integrity inside a warm Jest host: the trusted half that lives in the same process as the
// workspace's code (README "What grading resists").
//
// Workspace modules run in each test file's vm context, next to jest-circus and expect. This module
// (the host's own realm) keeps what decides a verdict out of their reach:
//   * the test context's intrinsics are locked before any workspace module runs (guard-lockdown.js),
//     and so are the host realm's, which Jest's own code (transforms, result collection) runs on;
//   * the module system refuses what only tampering needs: a workspace module outside the test
//     folders that requires a test file, fixture or helper, reaches one through require.cache,
//     module.parent or require.main, calls jest.mock & co, or loads vm, inspector, v8, worker_threads
//     and the other modules that reach into this realm; core modules come as per-context copies, so
//     a patched `fs` never reaches Jest's own file reads;
//   * guard-framework.js fixes the framework's entry points and keeps its own per-test record of
//     outcomes and passing assertions, which the harness trusts over Jest's report.
// What is refused is also reported ("tamper" entries); the harness turns any into the `tampered`
// status. What this cannot stop, and how it is contained instead, is in the README.
'use strict';

const path = require('path');
const util = require('util');
const { lockRealm, lockMembers, pinned } = require('./guard-lockdown');
const { through, unframed, amend } = require('./jest-warm');
const { disk: sealedDisk } = require('./sealed');

// Captured at load, before any workspace code runs in this process.
const { apply, defineProperty, getOwnPropertyDescriptor, ownKeys, getPrototypeOf } = Reflect;
const isProxy = util.types.isProxy;
const OuterError = Error;
const captureStackTrace = Error.captureStackTrace;
const setAdd = Set.prototype.add;
// Defined, not assigned: `push` would call a setter planted at that index on Array.prototype.
const push = (arr, x) => defineProperty(arr, arr.length, { value: x, writable: true, enumerable: true, configurable: true });

const WS = path.resolve(process.env.ETAI_WORKSPACE || '/scratch/ws');
const HOOKS_ID = 'etai-guard-hooks';
// Stack frames of these files never show in a failure message (see jest-warm.js `unframed`).
const OWN_FILES = [__filename, require.resolve('./guard-framework'), require.resolve('./guard-lockdown')];
const passOn = (fn, self, args) => through(fn, self, args, OWN_FILES);
const ours = (e) => unframed(e, OWN_FILES);

// ------------------------------------------------------------------ what is protected
// Tests and what they rely on: test files, anything under a test folder, Jest and Babel config, and
// the files the config names (setup files, environments, transforms). Mirrored by
// harness/grading/verify.py, which hashes the same set before and after a run.
const TEST_DIRS = new Set(['__tests__', '__mocks__', '__snapshots__', '__fixtures__']);
const TOP_TEST_DIRS = new Set(['test', 'tests', 'spec', '__test__']);
const CONFIG_RE = /^(package\.json|jest\.config\.[cm]?[jt]s|jest\.config\.json|babel\.config\.[cm]?[jt]s|babel\.config\.json|\.babelrc(\.[cm]?[jt]s|\.json)?|\.babelignore|tsconfig(\.[\w-]+)?\.json)$/;
const TEST_NAME_RE = /\.(test|spec)\.[cm]?[jt]sx?$/;

// What decides a verdict runs after workspace code and must not go through what that code can change
// in this realm: Array.prototype, RegExp.prototype and the iterator prototypes are watched, not
// frozen (guard-lockdown.js), and a change there is reported only at the next check point. So the
// decisions below use indexed loops and these pinned functions, never an array method, an iterator
// (for-of, spread, destructuring) or a RegExp method looked up on the prototype.
const { test: reTest } = RegExp.prototype;
pinned(CONFIG_RE);
pinned(TEST_NAME_RE);
const matches = (re, text) => apply(reTest, re, [text]);
function has(list, x) {
  for (let i = 0; i < list.length; i++) if (list[i] === x) return true;
  return false;
}

const protectedFiles = new Set(); // absolute paths: Jest's test files and config-named files

function inWorkspace(p) {
  return typeof p === 'string' && (p === WS || p.startsWith(WS + path.sep));
}

function isProtected(p) {
  if (!inWorkspace(p)) return false;
  if (protectedFiles.has(p)) return true;
  const parts = path.relative(WS, p).split(path.sep);
  if (has(parts, 'node_modules')) return false;
  if (parts.length > 1 && TOP_TEST_DIRS.has(parts[0])) return true;
  for (let i = 0; i < parts.length; i++) if (TEST_DIRS.has(parts[i])) return true;
  const base = parts[parts.length - 1];
  return matches(CONFIG_RE, base) || matches(TEST_NAME_RE, base);
}

// A project's dependencies when the sandbox mounts them read-only at <workspace>/node_modules
// (installed from the suite's lockfile, #16): nobody in the sandbox can change them, like Jest's own.
const DEPS = process.env.ETAI_DEPS_READONLY === '1' ? path.join(WS, 'node_modules') + path.sep : null;

// What the image installed: this runner's folder, Jest and its dependencies inside it (real paths:
// module file names are real paths). Nothing in the sandbox can write there (read-only root).
const INSTALL = [require('fs').realpathSync(__dirname) + path.sep];

function installed(file) {
  for (let i = 0; i < INSTALL.length; i++) if (file.startsWith(INSTALL[i])) return true;
  return false;
}

// Code the agent can write or put somewhere: workspace files that are not protected, and every file
// outside the workspace that the image did not install (TMPDIR, the scratch space: a source module
// can write a file there and require it). Trusted: protected workspace files, read-only project
// dependencies, the image's install. A caller with no file name (eval, new Function) is untrusted.
function untrusted(file) {
  if (typeof file !== 'string' || file === '') return true;
  if (inWorkspace(file)) return !isProtected(file) && !(DEPS && file.startsWith(DEPS));
  return !installed(file);
}

function addProtected(files) {
  for (const f of files) apply(setAdd, protectedFiles, [path.resolve(WS, f)]);
}

// Files a Jest project config names, relative to the workspace (for the harness's hash check too).
// Every key whose file Jest loads, in a test context or in the host realm (see `hostLoads`).
const CONFIG_KEYS = ['setupFiles', 'setupFilesAfterEnv', 'snapshotSerializers', 'globalSetup', 'globalTeardown',
  'testEnvironment', 'snapshotResolver', 'resolver', 'testResultsProcessor', 'testSequencer', 'prettierPath',
  'runner', 'testRunner', 'moduleLoader', 'dependencyExtractor'];

function configFiles(config) {
  const out = [];
  const take = (v) => { if (typeof v === 'string' && inWorkspace(v)) push(out, path.relative(WS, v)); };
  for (const key of CONFIG_KEYS) {
    const v = config[key];
    if (Array.isArray(v)) v.forEach(take); else take(v);
  }
  for (const entry of config.transform || []) take(entry[1]);
  if (config.haste) take(config.haste.hasteImplModulePath);
  return out;
}

// ------------------------------------------------------------------ records of one run
// One record per test file: tamper findings and, from guard-framework.js, each test's outcome.
let run = null;

function beginRun() {
  run = { files: new Map(), tamper: [] };
  checkHost();
}

function fileRecord(testPath) {
  if (!run) beginRun();
  let rec = run.files.get(testPath);
  if (!rec) {
    rec = { tests: [], tamper: [], checked: false };
    run.files.set(testPath, rec);
  }
  return rec;
}

function note(list, what) {
  const text = String(what).slice(0, 300);
  if (list.length < 20 && !has(list, text)) push(list, text);
}

function tamperIn(rec, what) { note(rec.tamper, what); }

function hostTamper(what) {
  if (!run) beginRun();
  note(run.tamper, what);
}

// The host realm's watched intrinsics (see lockHost), read back at every check point of a run.
let hostCheck = () => null;

function checkHost() {
  const changed = hostCheck();
  if (changed) hostTamper(`${changed} was replaced (host realm)`);
}

function takeRun() {
  checkHost();
  const out = { files: {}, tamper: run ? run.tamper : [] };
  if (run) run.files.forEach((rec, p) => { out.files[path.relative(WS, p)] = rec; }); // no iterator
  run = null;
  return out;
}

// ------------------------------------------------------------------ who is calling
// A framework capability (expect.extend, addEqualityTesters, an asymmetric matcher counted as the
// framework's) is granted by the call that asks for it, not by which files are somewhere on the
// stack: a promise job, a timer, a bound function, a getter or a Proxy trap run by the engine, or a
// frame compiled from a string shows no workspace file and yet runs workspace code's choice. So the
// frame right below the capability (below `callee`, past frames of `skip` files) must be a trusted
// file (a test file, a setup file, a read-only dependency: see `untrusted`) AND the source text it
// runs at that position must be a call of one of `names` (`.extend(`, `.any(`): a getter or a trap
// runs at a property read, a coercion at an operator, a promise job or a timer has no such frame.
let callSiteFile = null;
let callSiteProto = null;

function callSites(rec, callee) {
  const limitD = getOwnPropertyDescriptor(OuterError, 'stackTraceLimit');
  const prepD = getOwnPropertyDescriptor(OuterError, 'prepareStackTrace');
  if ((limitD && !('value' in limitD)) || (prepD && !('value' in prepD))) {
    tamperIn(rec, 'an accessor was planted on the host realm\'s Error');
    return null;
  }
  const holder = {};
  defineProperty(OuterError, 'stackTraceLimit', { value: 16, writable: true, configurable: true, enumerable: true });
  defineProperty(OuterError, 'prepareStackTrace', { value: (_, sites) => sites, writable: true, configurable: true });
  let sites;
  try {
    apply(captureStackTrace, OuterError, [holder, callee]);
    sites = holder.stack;
  } finally {
    if (limitD) defineProperty(OuterError, 'stackTraceLimit', limitD); else delete OuterError.stackTraceLimit;
    if (prepD) defineProperty(OuterError, 'prepareStackTrace', prepD); else delete OuterError.prepareStackTrace;
  }
  return Array.isArray(sites) ? sites : null;
}

const site = (s, name) => apply(callSiteProto[name], s, []);
const IDENT = /[\w$]/;
pinned(IDENT);

// Why the last call was refused, for the tamper note.
let refusal = '';

// The trusted frame right below `callee` and the text V8 runs there: { text, at }, or null
// (with `refusal` saying why). `sources(file)` gives the text V8 ran for a file (the module wrapper
// included), or null.
function trustedSite(rec, callee, sources, skip) {
  const sites = callSites(rec, callee);
  refusal = 'no caller frame';
  if (!sites) return null;
  let i = 0;
  while (i < sites.length && skip && skip(apply(callSiteFile, sites[i], []))) i++;
  if (i >= sites.length) return null; // a promise job, or a callback of nothing but the framework
  const s0 = sites[i];
  const file = apply(callSiteFile, s0, []);
  const where = typeof file === 'string'
    ? `${inWorkspace(file) ? path.relative(WS, file) : file}:${site(s0, 'getLineNumber')}` : 'code with no file';
  refusal = `called from ${where}`;
  if (untrusted(file) || site(s0, 'isEval')) return null;
  // The offset in the script V8 runs (its column numbers are not reliable in a Jest context).
  const text = sources(file);
  const at = site(s0, 'getPosition');
  if (typeof text !== 'string' || typeof at !== 'number' || at < 0 || at >= text.length) return null;
  refusal = `called from ${where}, where the code reads '${apply(String.prototype.slice, text, [at, at + 30])}'`;
  return { text, at };
}

// The index of the last character before `i` that is not white space, or -1.
function back(text, i) {
  while (i >= 0 && (text[i] === ' ' || text[i] === '\n' || text[i] === '\t' || text[i] === '\r')) i--;
  return i;
}

function trustedCall(rec, callee, names, sources, skip) {
  const found = trustedSite(rec, callee, sources, skip);
  if (!found) return false;
  const { text, at } = found;
  let end = at;
  while (end < text.length && matches(IDENT, text[end])) end++;
  const word = apply(String.prototype.slice, text, [at, end]);
  const before = back(text, at - 1);
  return before >= 0 && text[before] === '.' && has(names, word);
}

// A setter (`callee`) of the property `name` run by a trusted file's own statement `x.name = value`:
// V8 places a setter's caller at the `=`.
function trustedAssignment(rec, callee, name, sources) {
  const found = trustedSite(rec, callee, sources, null);
  if (!found) return false;
  const { text, at } = found;
  if (text[at] !== '=' || text[at + 1] === '=' || text[at + 1] === '>') return false;
  const end = back(text, at - 1) + 1;
  const start = end - name.length;
  const dot = back(text, start - 1);
  return start > 0 && apply(String.prototype.slice, text, [start, end]) === name && dot >= 0 && text[dot] === '.';
}

function lastRefusal() { return refusal; }

// ------------------------------------------------------------------ the host realm
let hostLocked = false;

// Lock this realm's intrinsics and take away the routes from a test context into this realm's code
// generation (a workspace function's `.constructor` is reachable through any host object it sees).
function lockHost() {
  if (hostLocked) return;
  hostLocked = true;
  // V8's CallSite prototype: reached through any prepareStackTrace callback, so it is locked too.
  const save = OuterError.prepareStackTrace;
  OuterError.prepareStackTrace = (_, sites) => sites;
  const holder = {};
  captureStackTrace(holder);
  const first = holder.stack[0];
  OuterError.prepareStackTrace = save;
  const siteProto = getPrototypeOf(first);
  callSiteFile = siteProto.getFileName;
  callSiteProto = { isEval: siteProto.isEval, getLineNumber: siteProto.getLineNumber, getPosition: siteProto.getPosition };
  const noCodegen = (name) => {
    const f = function () {
      hostTamper(`code generation in the host realm (${name} constructor)`);
      throw new EvalError('etai: code generation from strings is disabled in the Jest host');
    };
    defineProperty(f, 'name', { value: name });
    return f;
  };
  const [gen, agen, afn] = [function* () {}, async function* () {}, async function () {}];
  for (const [proto, name] of [[Function.prototype, 'Function'], [getPrototypeOf(gen), 'GeneratorFunction'],
    [getPrototypeOf(agen), 'AsyncGeneratorFunction'], [getPrototypeOf(afn), 'AsyncFunction']]) {
    defineProperty(proto, 'constructor', { value: noCodegen(name), writable: true, configurable: true });
  }
  hostCheck = lockRealm(globalThis);
  Object.freeze(siteProto);
  // The global bindings of the intrinsics: Node's stack formatting reads globalThis.Error.
  for (const name of ['Error', 'Object', 'Array', 'Function', 'Promise', 'Reflect', 'JSON', 'Symbol', 'Map', 'Set',
    'WeakMap', 'String', 'Number', 'RegExp']) {
    defineProperty(globalThis, name, { value: globalThis[name], writable: false, configurable: false, enumerable: false });
  }
  lockShared();
}

// Objects of this realm that every test context holds and this realm's own code calls into while
// it loads and transforms the next test file (Babel encodes its source maps with Buffer; the
// transform cache keys with crypto's Hash): a method planted there by one test file would run on
// the next file's compiled code, which the guard then trusts as that test file's. Their methods are
// locked as the intrinsics are (tests that spy on Buffer or Hash methods cannot).
function lockShared() {
  const crypto = require('crypto');
  const hash = getPrototypeOf(crypto.createHash('sha256'));
  const hmac = getPrototypeOf(crypto.createHmac('sha256', 'k'));
  for (const obj of [Buffer, Buffer.prototype, hash, getPrototypeOf(hash), hmac, getPrototypeOf(hmac)]) lockMembers(obj);
}

// ------------------------------------------------------------------ the host realm's own loads
// Jest loads some of a project's files into this realm, outside every test context: the config,
// its transformers, environments, global setup, Babel's config, and whatever those require. The
// ones the config names are protected; a file the agent can edit that they reach (a `src/` helper
// required by jest.config.js, a Babel plugin) would run here, next to this module and the answer's
// writer, where no check of a test context applies. Such a file may load only as the runner found
// it at init: same inode, size and change time (tests and commands cannot write the workspace, so
// only the agent's own edits change them). A changed one is refused before it runs, and reported.
// node_modules is not checked: no tool writes it. ES modules imported here are not seen by this
// hook (README "What grading resists").
const fileSig = require('./file-sig');
let pristine = null;

function setPristine(sigs) {
  if (!pristine && sigs && typeof sigs === 'object') pristine = new Map(Object.entries(sigs));
}

// Every file compiled or read as a module in this realm, for tests/harness/test_tamper.py's check that
// none lies where the sandbox user can write (a Set: a file loads once).
const hostLoaded = new Set();

// A load into this realm from outside the workspace must come from the image's install or the
// read-only dependencies: anything else (HOME, TMPDIR, the scratch space, a module folder Node or Jest
// falls back to) is a file the sandbox user may have put there, and would run next to this module.
function hostLoadAllowed(filename) {
  if (hostLoaded.size < 5000) apply(setAdd, hostLoaded, [filename]);
  if (inWorkspace(filename)) {
    const rel = untrusted(filename) ? path.relative(WS, filename) : null;
    if (rel === null || has(rel.split(path.sep), 'node_modules')) return;
    let sig = null;
    try { sig = fileSig(filename); } catch (e) { /* gone: not the pristine file */ }
    if (!pristine || pristine.get(rel) !== sig) {
      hostTamper(`${rel}, changed since the workspace was set up, was loaded into the Jest host's own realm`);
      throw new OuterError(`etai: ${rel} was changed, and Jest loads it outside the tests (the config or what it requires)`);
    }
    return;
  }
  if (!installed(filename) && !(DEPS && filename.startsWith(DEPS))) {
    hostTamper(`${filename}, which the image did not install, was loaded into the Jest host's own realm`);
    throw new OuterError(`etai: ${filename} is not part of the image; the Jest host loads no code from there`);
  }
}

function hostLoads() {
  const Module = require('module');
  const compile = Module.prototype._compile;
  function _compile(content, filename) {
    hostLoadAllowed(filename);
    return apply(compile, this, [content, filename]);
  }
  // Writable: pirates (Jest's transform of globalSetup and the like) sets its own `_compile` on the
  // module, which ends in this one. Only trusted code runs in this realm to replace it.
  defineProperty(Module.prototype, '_compile', { value: _compile, writable: true, configurable: false });
  // JSON and native addons load without _compile.
  for (const ext of ['.json', '.node']) {
    const load = Module._extensions[ext];
    Module._extensions[ext] = function (module, filename) {
      hostLoadAllowed(filename);
      return apply(load, this, [module, filename]);
    };
  }
}

// What the host realm loaded and where it looks for modules (tests/harness/test_tamper.py).
function hostPaths() {
  const Module = require('module');
  const loaded = [];
  hostLoaded.forEach((f) => push(loaded, f));
  return { loaded, global_paths: Module.globalPaths.slice(), home: process.env.HOME || null,
    tmpdir: process.env.TMPDIR || null };
}

// ------------------------------------------------------------------ core modules for a test context
// Modules through which workspace code reaches this realm's code or memory.
const DENIED = new Set(['vm', 'v8', 'inspector', 'inspector/promises', 'worker_threads', 'repl', 'trace_events',
  'wasi', 'async_hooks', 'module']);
// Plain-object modules are copied per test context (so `jest.spyOn(fs, 'readFileSync')` works and
// stays inside the test file); `assert` is copied and frozen (tests that use it rely on it).
const NAMESPACE_KEYS = new Set(['promises', 'posix', 'win32', 'types', 'constants', 'strict']);

function copyModule(real, frozen, seen = new Map()) {
  if (seen.has(real)) return seen.get(real); // path.posix.win32.posix ... is path again
  const copy = typeof real === 'function'
    ? function (...args) { return apply(real, this, args); }
    : Object.create(getPrototypeOf(real));
  seen.set(real, copy);
  for (const key of ownKeys(real)) {
    if (typeof real === 'function' && (key === 'length' || key === 'name' || key === 'prototype')) continue;
    const d = getOwnPropertyDescriptor(real, key);
    if (NAMESPACE_KEYS.has(key)) {
      const v = real[key];
      const value = v && typeof v === 'object' ? copyModule(v, frozen, seen) : v;
      defineProperty(copy, key, { value, writable: !frozen, enumerable: d.enumerable, configurable: !frozen });
    } else if (frozen && 'value' in d) {
      defineProperty(copy, key, { value: d.value, writable: false, enumerable: d.enumerable, configurable: false });
    } else {
      defineProperty(copy, key, d);
    }
  }
  if (typeof real === 'function') {
    defineProperty(copy, 'name', { value: real.name });
    if (real.prototype) copy.prototype = real.prototype;
  }
  return frozen ? Object.freeze(copy) : copy;
}

// Members of a test context's `process` (Jest's copy of the real one) that reach native bindings,
// the IPC channel or other modules without going through the module system.
const PROCESS_CUT = ['binding', '_linkedBinding', 'dlopen', '_getActiveHandles', '_getActiveRequests', 'channel',
  '_channel', 'send', 'disconnect', 'setUncaughtExceptionCaptureCallback', 'hasUncaughtExceptionCaptureCallback'];
// Of these, the two that libraries probe for features answer as a Node without the binding would,
// and are not a refusal: chai 4 (through loupe) runs `try { process.binding('util') } catch {}` when
// it loads, which made every test file that requires chai `tampered` (radash, #16). The call
// reaches nothing either way.
const PROCESS_ABSENT = new Set(['binding', '_linkedBinding']);
// And these are simply not there, as in a Node started without an IPC channel: the runner's
// channel is the host's, not the tests' (the descriptor itself is refused by the fs copy).
const PROCESS_GONE = new Set(['channel', '_channel', 'send', 'disconnect']);

// The runner's channel to this host is a descriptor of this process, and a test context's copies of
// fs, net, tty and child_process would read or write any descriptor by number: each of their
// functions refuses that one (as a first argument, an `fd` option, or a child's stdio entry).
let channelFd = -1;

// Read without running anything the caller planted: a Proxy or an accessor on the way to `fd` or
// `stdio` could answer one thing here and another to the real function, so either counts as naming it.
function optionNames(obj, key, test) {
  for (let o = obj, depth = 0; o && depth < 32; o = getPrototypeOf(o), depth++) {
    if (isProxy(o)) return true;
    const d = getOwnPropertyDescriptor(o, key);
    if (d) return !('value' in d) || test(d.value);
  }
  return false;
}

// A child's stdio list names the channel by its number anywhere, or as 'inherit' at its own index
// (the child's descriptor N is then this process's N).
function listNames(list) {
  if (isProxy(list)) return true;
  const n = getOwnPropertyDescriptor(list, 'length').value;
  for (let i = 0; i < n; i++) {
    const d = getOwnPropertyDescriptor(list, i);
    if (d && (!('value' in d) || d.value === channelFd || (i === channelFd && d.value === 'inherit'))) return true;
  }
  return false;
}

function namesChannel(args) {
  if (channelFd < 0) return false;
  if (args[0] === channelFd) return true;
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (!a || typeof a !== 'object') continue;
    if (optionNames(a, 'fd', (v) => v === channelFd)) return true;
    if (optionNames(a, 'stdio', (v) => Array.isArray(v) && listNames(v))) return true;
  }
  return false;
}

const CHANNEL_MODULES = new Set(['fs', 'net', 'tty', 'child_process']);

function sealChannel(copy, rec) {
  for (const key of ownKeys(copy)) {
    const d = getOwnPropertyDescriptor(copy, key);
    const real = d && d.value;
    if (typeof real !== 'function' || !d.writable) continue;
    const wrapper = function (...args) {
      if (namesChannel(args)) {
        tamperIn(rec, `the Jest host's channel to the runner was reached (${String(key)})`);
        const e = new Error(`EBADF: bad file descriptor, ${String(key)}`);
        e.code = 'EBADF';
        throw e;
      }
      return new.target ? Reflect.construct(real, args, new.target === wrapper ? real : new.target) : apply(real, this, args);
    };
    // What else the function carries stays (util.promisify's custom symbols on exec, exists, read).
    for (const k of ownKeys(real)) {
      if (k === 'length' || k === 'caller' || k === 'arguments') continue;
      defineProperty(wrapper, k, getOwnPropertyDescriptor(real, k));
    }
    defineProperty(copy, key, { value: wrapper, writable: true, enumerable: d.enumerable, configurable: true });
  }
  return copy;
}

// ------------------------------------------------------------------ the runtime
// Jest's Runtime with the rules above. jest-runner builds one per test file: the constructor runs
// after the test environment exists and before any setup file or test file is loaded.
function guardedRuntime(Base, jestDir) {
  const circus = path.dirname(require.resolve('jest-circus/package.json', { paths: [jestDir] }));
  const FRAMEWORK = path.join(circus, 'build', 'legacy-code-todo-rewrite', 'jestAdapterInit.js');
  const framework = require('./guard-framework');
  framework.connect({ tamperIn, checkHost, isProxy, lastRefusal });
  const transforms = framework.sourceTransforms(jestDir);
  const CORE = new Set(require('module').builtinModules);
  const isCore = (name) => typeof name === 'string' && (CORE.has(name.startsWith('node:') ? name.slice(5) : name));
  const MOCK_API = ['mock', 'unmock', 'doMock', 'dontMock', 'deepUnmock', 'setMock', 'enableAutomock',
    'disableAutomock', 'autoMockOn', 'autoMockOff', 'createMockFromModule', 'requireMock'];
  const EVAL_KEY = 'Object.<anonymous>';

  // Named as Jest's class, so that stack frames read `Runtime.requireModule` as they do in stock Jest.
  class Runtime extends Base {
    constructor(...args) {
      super(...args);
      const rec = fileRecord(this._testPath);
      this._etai = { rec, jestDir, copies: new Map(), sources: new Map() };
      const sources = (file) => this._etai.sources.get(file) || null;
      this._etai.trustedCall = (callee, names, skip) => trustedCall(rec, callee, names, sources, skip);
      this._etai.trustedAssignment = (callee, name) => trustedAssignment(rec, callee, name, sources);
      this._etai.hooks = framework.hooks(this);
      const g = this._environment.global;
      this._etai.check = lockRealm(g, { context: this._environment.getVmContext() });
      checkHost();
      const proc = g.process;
      if (proc) {
        for (const name of PROCESS_CUT) {
          defineProperty(proc, name, {
            value: PROCESS_GONE.has(name) ? undefined : PROCESS_ABSENT.has(name)
              ? (module) => { throw new Error(`No such module: ${module}`); }
              : typeof proc[name] === 'function'
                ? () => { tamperIn(rec, `process.${name}()`); throw new Error(`etai: process.${name} is not available in a graded run`); }
                : undefined,
            writable: false, configurable: false, enumerable: false,
          });
        }
        defineProperty(proc, 'getBuiltinModule', {
          value: (name) => this._etaiCore(name, WS), writable: false, configurable: false, enumerable: false,
        });
      }
      // The framework is loaded now, before any setup file, so that what it keeps on the global
      // object (the matcher table, saved natives) is made by trusted code.
      this.requireInternalModule(FRAMEWORK);
      framework.lockEarly(this, g, rec);
    }

    _etaiCore(name, from) {
      const bare = String(name).startsWith('node:') ? String(name).slice(5) : String(name);
      if (DENIED.has(bare) && untrusted(from)) {
        tamperIn(this._etai.rec, `require('${name}') from ${path.relative(WS, from) || 'workspace code'}`);
        throw new Error(`etai: the '${bare}' module is not available to workspace code in a graded run`);
      }
      if (bare === 'process' || bare === 'module') return passOn(super._requireCoreModule, this, [name, true]);
      let copy = this._etai.copies.get(bare);
      if (!copy) {
        const real = require(bare);
        copy = (real && typeof real === 'object') || bare === 'assert' || bare === 'assert/strict'
          ? copyModule(real, bare === 'assert' || bare === 'assert/strict') : real;
        // The disk's readFileSync, not this realm's, which answers sealed files (sealed.js).
        if (bare === 'fs') defineProperty(copy, 'readFileSync', { value: sealedDisk.readFileSync, writable: true, enumerable: true, configurable: true });
        if (CHANNEL_MODULES.has(bare)) copy = sealChannel(copy, this._etai.rec);
        this._etai.copies.set(bare, copy);
      }
      return copy;
    }

    requireModule(from, moduleName, options, isRequireActual) {
      if (!(options && options.isInternalModule)) {
        if (isCore(moduleName)) return this._etaiCore(moduleName, from);
        if (moduleName !== undefined) this._etaiCheckTarget(from, moduleName);
      }
      try {
        return super.requireModule(from, moduleName, options, isRequireActual);
      } catch (e) {
        throw ours(e);
      }
    }

    requireMock(from, moduleName) {
      this._etaiCheckTarget(from, moduleName);
      return passOn(super.requireMock, this, [from, moduleName]);
    }

    requireInternalModule(from, to) {
      if (to === HOOKS_ID) return this._etai.hooks;
      try {
        return super.requireInternalModule(from, to);
      } catch (e) {
        throw ours(e);
      }
    }

    // A workspace module outside the tests may not load a test file, fixture or helper: sharing the
    // test's instance would let it change the test's data.
    _etaiCheckTarget(from, moduleName) {
      if (!untrusted(from) || typeof moduleName !== 'string' || moduleName === '@jest/globals' || isCore(moduleName)) return;
      let target;
      try {
        target = this._resolveCjsModule(from, moduleName);
      } catch (e) {
        return; // not found: Jest reports it as it would
      }
      if (isProtected(target)) {
        tamperIn(this._etai.rec, `${path.relative(WS, from)} requires ${path.relative(WS, target)}`);
        throw unframed(new Error(`etai: ${path.relative(WS, from)} may not load ${path.relative(WS, target)} (a test file or test data)`), OWN_FILES);
      }
    }

    transformFile(filename, options) {
      if (options && options.isInternalModule && transforms.has(filename)) return transforms.get(filename);
      try {
        return super.transformFile(filename, options);
      } catch (e) {
        throw ours(e);
      }
    }

    _createJestObjectFor(from) {
      const jestObject = super._createJestObjectFor(from); // builds an object, throws nothing
      if (untrusted(from)) {
        const rec = this._etai.rec;
        for (const name of MOCK_API) {
          jestObject[name] = () => {
            tamperIn(rec, `jest.${name}() from ${path.relative(WS, from)}`);
            throw new Error(`etai: jest.${name} may only be called from test files in a graded run`);
          };
        }
      }
      return jestObject;
    }

    _createRequireImplementation(from, options) {
      const req = super._createRequireImplementation(from, options); // builds functions, throws nothing
      if ((options && options.isInternalModule) || !untrusted(from.filename)) return req;
      const runtime = this;
      const wrapped = function require(id) { return req(id); };
      wrapped.resolve = req.resolve;
      wrapped.extensions = req.extensions;
      const rec = this._etai.rec;
      let cache = null; // made on first use: few modules ever look
      defineProperty(wrapped, 'cache', {
        enumerable: true,
        get: () => cache || (cache = new Proxy(Object.create(null), {
          get: (_, key) => (typeof key === 'string' ? facade(runtime._moduleRegistry.get(key), rec) : undefined),
          has: (_, key) => typeof key === 'string' && !isProtected(key) && runtime._moduleRegistry.has(key),
          ownKeys: () => {
            const keys = [];
            runtime._moduleRegistry.forEach((_, k) => { if (!isProtected(k)) push(keys, k); });
            return keys;
          },
          getOwnPropertyDescriptor: () => ({ configurable: true, enumerable: true }),
          defineProperty: () => true, deleteProperty: () => true, set: () => true,
        })),
      });
      defineProperty(wrapped, 'main', { enumerable: true, get: () => facade(runtime._mainModule, rec) });
      return wrapped;
    }

    // The module wrapper's head, made without this realm's Array methods and iterators (Jest's own
    // uses `filter`, `join` and a spread): workspace code reaches this realm's Array.prototype
    // through any host array (`Buffer.from('a').toJSON().data`), and a `join` replaced for the
    // length of one `require` of a trusted file wrote code of its own into that file's wrapper,
    // which then ran as trusted code (it reached the host realm through `vm`).
    constructModuleWrapperStart() {
      let args = 'module,exports,require,__dirname,__filename';
      if (this._config.injectGlobals) args += ',jest';
      const extra = this._config.sandboxInjectedGlobals;
      const n = extra ? getOwnPropertyDescriptor(extra, 'length').value : 0;
      for (let i = 0; i < n; i++) {
        const d = getOwnPropertyDescriptor(extra, i);
        if (d && typeof d.value === 'string') args += `,${d.value}`;
      }
      return `({"${EVAL_KEY}":function(${args}){`;
    }

    wrapCodeInModuleWrapper(content) {
      return `${this.constructModuleWrapperStart()}${content}\n}});`;
    }

    // An untrusted module's function gets a view of its `module` object whose parent and main
    // show no more than the name of a protected module.
    createScriptFromCode(scriptSource, filename) {
      let script;
      try {
        script = super.createScriptFromCode(scriptSource, filename);
      } catch (e) {
        throw ours(e);
      }
      if (!untrusted(filename)) {
        // The text V8 runs, kept for `trustedCall` (the same string Jest holds; the wrapper shifts line 1).
        this._etai.sources.set(filename, this.constructModuleWrapperStart() + scriptSource);
        return script;
      }
      const rec = this._etai.rec;
      return {
        runInContext(context, opts) {
          const result = script.runInContext(context, opts);
          const fn = result && result[EVAL_KEY];
          if (typeof fn !== 'function') return result;
          return { [EVAL_KEY]: function (module, ...rest) { return passOn(fn, this, [facade(module, rec), ...rest]); } };
        },
      };
    }
  }
  return Runtime;
}

const facades = new WeakMap();

// What an untrusted module sees of another module: a protected one shows its name only (reaching
// for its require, exports or children is reported), an untrusted one the same rules again.
function facade(mod, rec) {
  if (!mod || typeof mod !== 'object') return mod === undefined ? undefined : null;
  let f = facades.get(mod);
  if (f) return f;
  if (isProtected(mod.filename)) {
    const info = { id: mod.id, filename: mod.filename, path: mod.path };
    defineProperty(info, 'loaded', { get: () => mod.loaded, enumerable: true });
    const hiddenKeys = ['require', 'exports', 'children', 'parent', 'main'];
    for (let i = 0; i < hiddenKeys.length; i++) {
      const key = hiddenKeys[i];
      defineProperty(info, key, {
        get() {
          tamperIn(rec, `workspace code reached ${key} of ${path.relative(WS, mod.filename)}`);
          throw new Error(`etai: ${path.relative(WS, mod.filename)} belongs to the tests`);
        },
      });
    }
    f = Object.freeze(info);
  } else {
    f = new Proxy(mod, {
      get(target, key) {
        if (key === 'parent' || key === 'main') return facade(target[key], rec);
        if (key === 'children') {
          const kids = target.children;
          if (!Array.isArray(kids)) return kids;
          const out = [];
          for (let i = 0; i < kids.length; i++) push(out, facade(kids[i], rec));
          return out;
        }
        return target[key];
      },
    });
  }
  facades.set(mod, f);
  return f;
}

// ------------------------------------------------------------------ install
// jest-circus's adapter (Jest's default test runner, loaded by jest-runner once per test file),
// amended with the guard's steps: arm the framework once it is initialised, lock what setup files
// and the test file added, check the file at the end. Each step is appended to an existing line,
// so every stack frame and failure message reads exactly as in stock Jest.
function amendAdapter(jestDir) {
  const hook = JSON.stringify(require.resolve('./guard-framework'));
  amend(jestDir, 'jest-circus', path.join('build', 'legacy-code-todo-rewrite', 'jestAdapter.js'), [
    ["'use strict';\n", `'use strict'; const __etaiGuard = require(${hook});\n`],
    ['    testPath\n  });\n  if (config.fakeTimers.enableGlobally) {',
      '    testPath\n  }); __etaiGuard.arm(runtime, environment, config, globals, snapshotState);\n  if (config.fakeTimers.enableGlobally) {'],
    ['  }\n  const esm = runtime.unstable_shouldLoadAsEsm(testPath);',
      '  } __etaiGuard.relock(runtime);\n  const esm = runtime.unstable_shouldLoadAsEsm(testPath);'],
    ['    runtime.requireModule(testPath);\n  }\n  const results', '    runtime.requireModule(testPath);\n  } __etaiGuard.relock(runtime);\n  const results'],
    ['  _addSnapshotData(results, snapshotState);\n', '  _addSnapshotData(results, snapshotState); __etaiGuard.fileEnd(runtime, results);\n'],
  ], 'etai guard');
}

// Make every test file in this process run under the rules above; call once, after Jest is loaded.
function install(jestDir, { channelFd: fd = -1 } = {}) {
  channelFd = typeof fd === 'number' ? fd : -1;
  INSTALL.push(require('fs').realpathSync(path.resolve(jestDir, '..')) + path.sep);
  const runtimeModule = require(require.resolve('jest-runtime', { paths: [jestDir] }));
  if (typeof runtimeModule.default !== 'function') throw new Error('etai guard: jest-runtime has no default export');
  runtimeModule.default = guardedRuntime(runtimeModule.default, jestDir);
  amendAdapter(jestDir);
  hostLoads();
  lockHost();
}

// A forked host draws its own secrets (guard-framework.js `reseed`).
function afterFork() { require('./guard-framework').reseed(); }

module.exports = {
  WS, install, afterFork, beginRun, takeRun, fileRecord, tamperIn, hostTamper, checkHost, addProtected, setPristine, configFiles,
  isProtected, hostPaths, lastRefusal,
  untrusted, isProxy,
};

// Warm Jest host: keeps Jest loaded and runs it on request (forked by runner.js, own process group).
//
// Test code runs in this process, so nothing it prints is trusted: the answer travels over the IPC
// channel, tagged with the request's nonce, which only this module's closure sees; the runner drops
// any message without it. A test that calls process.exit() ends this process before an answer is
// sent, which the runner reports as `no_result_record`.
'use strict';

const fs = require('fs');
const path = require('path');

// No process of the sandbox user may open an inspector in a host: Node opens one on 127.0.0.1:9229
// at SIGUSR1 (Node 20 has no --disable-sigusr1), and code sent to it runs in the host's own realm,
// outside every guard layer. A listener of ours takes the signal instead of the inspector
// (docs/grading.md, "Nothing that serves a graded run is within reach").
process.on('SIGUSR1', () => {});

// Started as root by a root runner (the Docker sandbox), a host stays root while it only waits or
// warms on the template (the zygote, forever): the sandbox user can then neither signal nor trace
// a process that will serve a graded run or fork one. It becomes the sandbox user when it first
// looks at the workspace (`asSandboxUser`, before any request that loads it): the workspace (owned
// by root) is then read-only to every test, and the changed credentials make this process
// non-dumpable, so processes a test starts cannot ptrace it or open its /proc/<pid>/mem and fds.
const SANDBOX_ID = process.getuid && process.getuid() === 0 && process.env.ETAI_SANDBOX_UID
  ? Number(process.env.ETAI_SANDBOX_UID) : 0;
let sandboxUser = SANDBOX_ID === 0; // already as the runner's user: nothing to drop
function asSandboxUser() {
  if (sandboxUser) return;
  process.setgroups([SANDBOX_ID]);
  process.setgid(SANDBOX_ID);
  process.setuid(SANDBOX_ID);
  sandboxUser = true;
}

// Node's global module folders ($HOME/.node_modules, $HOME/.node_libraries, NODE_PATH) were read
// from the environment at start-up: made again from the runner's HOME (a folder the sandbox user
// cannot write), with NODE_PATH gone, before anything is resolved.
delete process.env.NODE_PATH;
require('module')._initPaths();
// The descriptor of the channel to the runner: no test context may read or write it (guard.js).
const CHANNEL_FD = process.channel && typeof process.channel.fd === 'number' ? process.channel.fd : -1;

const WS = path.resolve(process.env.ETAI_WORKSPACE || '/scratch/ws');
const JEST = process.env.ETAI_JEST || path.join(__dirname, 'node_modules', 'jest');
// V8's compiled code of the Jest install, made when the image was built (code-cache.js).
const codeCache = require('./code-cache');
const CODE_CACHE_WRITE = process.env.ETAI_CODE_CACHE_WRITE === '1'; // the image build's run only
codeCache.install(process.env.ETAI_CODE_CACHE, require('./jest-warm').inside(JEST), { write: CODE_CACHE_WRITE });
// Keep what never changes between runs (the Jest install itself): about half of a run.
require('./jest-warm')(JEST);
// Held-out test files this host's user cannot read: their text comes with the graded request.
const sealed = require('./sealed');
sealed.install(JEST);
// Transformed code from a store nobody here can write, keyed by all it depends on (#32).
const transformCache = require('./transform-cache');
transformCache(JEST, { store: process.env.ETAI_TRANSFORM_STORE, out: process.env.ETAI_TRANSFORM_OUT, sealed: sealed.isSealed });

const { runCLI } = require(JEST);
// Grading integrity (guard.js). Off only where the harness asks for it by name (benchmarks).
const guard = process.env.ETAI_JEST_GUARD === 'off' ? null : require('./guard');
if (guard) guard.install(JEST, { channelFd: CHANNEL_FD });

// Every answer is written out here, as JSON text, and travels as a string: `process.send` would
// JSON.stringify the objects themselves, which asks every array for a `toJSON` through this realm's
// Array.prototype — reachable by workspace code (through any host array a test is handed) and not
// frozen (see guard-lockdown.js). A `toJSON` planted there rewrote the guard's record in flight
// (the tamper notes dropped, the assertion counts raised): a false green. This writer reads only own
// data properties with indexed loops and calls nothing workspace code can replace (JSON and Reflect
// are frozen by the guard; a string or number is written by JSON.stringify, which asks primitives
// nothing). runner.js parses the text.
// Pinned now, before any test runs: `process.send` looks `_send` up on the process at every call,
// and the answer must not go through anything a later run could replace (process.send itself
// does no more than this call: see Node's child_process setupChannel).
const pinnedSend = process._send;
const rawSend = (message) => Reflect.apply(pinnedSend, process, [message, undefined, { swallowErrors: false }, undefined]);
const { stringify } = JSON;
const { getOwnPropertyDescriptor: ownDesc, ownKeys: keysOf } = Reflect;
const { isArray } = Array;

function encode(v) {
  if (v === null || v === undefined || typeof v === 'function' || typeof v === 'symbol') return 'null';
  if (typeof v !== 'object') return stringify(v); // NaN and Infinity become null, as JSON.stringify writes them
  let out = '';
  if (isArray(v)) {
    const n = ownDesc(v, 'length').value;
    for (let i = 0; i < n; i++) {
      const d = ownDesc(v, i);
      out += (i ? ',' : '') + encode(d && 'value' in d ? d.value : null);
    }
    return `[${out}]`;
  }
  const keys = keysOf(v);
  for (let i = 0; i < keys.length; i++) {
    const k = keys[i];
    const d = typeof k === 'string' ? ownDesc(v, k) : undefined;
    if (!d || !d.enumerable || !('value' in d) || d.value === undefined || typeof d.value === 'function') continue;
    out += (out ? ',' : '') + stringify(k) + ':' + encode(d.value);
  }
  return `{${out}}`;
}

function send(message) {
  rawSend({ nonce: message.nonce, json: encode(message) });
}
let CACHE = path.join(process.env.TMPDIR || '/tmp', 'jest-cache');

// The streams are this realm's objects, which a test context also reaches (its `process.stdout`):
// their length and `once` are read through the prototypes, as pinned at load, so that no getter or
// method a test planted on them runs here while the answer is on its way.
const writableLength = Reflect.getOwnPropertyDescriptor(require('stream').Writable.prototype, 'writableLength').get;
const once = require('events').EventEmitter.prototype.once;

function drained(stream) {
  return Reflect.apply(writableLength, stream, []) > 0
    ? new Promise((ok) => Reflect.apply(once, stream, ['drain', ok])) : Promise.resolve();
}

function slim(results) {
  return {
    success: results.success,
    numTotalTestSuites: results.numTotalTestSuites,
    numFailedTestSuites: results.numFailedTestSuites,
    numRuntimeErrorTestSuites: results.numRuntimeErrorTestSuites,
    numTotalTests: results.numTotalTests,
    numPassedTests: results.numPassedTests,
    numFailedTests: results.numFailedTests,
    numPendingTests: results.numPendingTests,
    testResults: results.testResults.map((r) => ({
      file: path.relative(WS, r.testFilePath),
      execError: r.testExecError ? String(r.testExecError.message || r.testExecError).slice(0, 4000) : null,
      failureMessage: r.failureMessage ? r.failureMessage.slice(0, 8000) : null,
      tests: r.testResults.map((t) => ({
        name: t.fullName, status: t.status, duration: t.duration, asserts: t.numPassingAsserts,
        failureMessages: (t.failureMessages || []).map((m) => m.slice(0, 4000)),
      })),
    })),
  };
}

// Workspace modules that load a module by a computed path (`require(x)`, `import(x)`,
// `jest.requireActual(x)`: anything but one string literal), which Jest's dependency graph cannot
// follow: dayjs's test/locale/keys.test.js requires every file of src/locale by a path it builds,
// and a change to one locale was related to no test (a regression a whole run caught went unseen).
// Every test that reaches such a module, or is one, is related to every change (`listRelated`).
// Read as text, comments included (a false hit only runs more tests). null: the workspace has more
// files than are read, and nothing can be shown.
const COMPUTED_LOAD = /\b(?:require(?:Actual|Mock)?|import)\s*\(\s*(?!(['"])[^'"\n]*\1\s*\))/;
const MODULE_FILE = /\.(?:[cm]?[jt]s|[jt]sx)$/;
function computedLoaders() {
  const found = [];
  let n = 0;
  const walk = (dir) => {
    let entries;
    try { entries = fs.readdirSync(dir, { withFileTypes: true }); } catch (e) { return true; }
    for (const e of entries) {
      if (e.name === 'node_modules' || e.name === '.git') continue;
      const p = path.join(dir, e.name);
      if (e.isDirectory()) { if (!walk(p)) return false; continue; }
      if (!e.isFile() || !MODULE_FILE.test(e.name)) continue;
      if (++n > 20000) return false;
      let text;
      try { text = fs.readFileSync(p, 'utf8'); } catch (e2) { continue; } // sealed: listed by the harness
      if (COMPUTED_LOAD.test(text)) found.push(p);
    }
    return true;
  };
  return walk(WS) ? found : null;
}

// The test files Jest's dependency graph relates to `changed` (workspace paths), as
// `jest --listTests --findRelatedTests` prints them; no test code runs for this. The graph is
// Jest's own (its resolver: index files, moduleNameMapper, modulePaths, the project's extensions)
// over the whole workspace: a project's `roots` often leave out files through which its tests
// reach a change (fastest-validator's TypeScript tests in test/ load lib/ through the top
// index.js), and a graph of the roots alone misses those tests. A file this lists that the
// project's own run would not (outside its roots) is dropped by the caller, which knows the
// project's test files (docs/grading.md).
// With them, every test related to a module that loads by a computed path (`computedLoaders`);
// null where that cannot be shown.
async function listRelated(changed) {
  const dynamic = computedLoaders();
  if (!dynamic) return null;
  const abs = [...new Set(changed.map((f) => path.resolve(WS, f)).concat(dynamic))];
  const argv = { _: abs, $0: 'jest', ci: true, watchman: false, listTests: true, json: true,
    findRelatedTests: true, passWithNoTests: true, cache: !guard, cacheDirectory: CACHE, roots: [WS] };
  const lines = [];
  const log = console.log;
  console.log = (...a) => { lines.push(a.join(' ')); };
  try {
    await runCLI(argv, [WS]);
  } finally { console.log = log; }
  return JSON.parse(lines.join('\n') || '[]').map((f) => path.relative(WS, f));
}

// A graded run's test files when verify.py scopes it (`_scope`): the verification files
// (`include`), and the test files related to the changed files that are among `keep` (files with
// a test passing at the start: a file none of whose tests passed cannot show a regression).
// Listed in the fresh host that then runs them, after the guard's record of the run began.
async function scopedFiles(scope) {
  const keep = new Set(scope.keep);
  const related = scope.changed.length ? await listRelated(scope.changed) : [];
  return [...new Set((related || scope.keep).filter((f) => keep.has(f)).concat(scope.include))].sort();
}

const EMPTY = { success: true, numTotalTestSuites: 0, numFailedTestSuites: 0, numRuntimeErrorTestSuites: 0,
  numTotalTests: 0, numPassedTests: 0, numFailedTests: 0, numPendingTests: 0, testResults: [] };

async function run(nonce, testFiles, namePattern, shard, related, scope, projectTests) {
  // The record begins before anything of the workspace is loaded (a scoped run's listing too).
  if (guard) guard.beginRun();
  // The test files that depend on these sources, by Jest's own dependency graph (the suite
  // builder's mutant runs: a test that cannot load the mutated file cannot catch it), of those the
  // project's own run has (the runner's listing at init).
  const own = related && related.length ? new Set(Array.isArray(projectTests) ? projectTests : []) : null;
  const planned = scope ? await scopedFiles(scope) : own ? ((await listRelated(related)) || [...own]).filter((f) => own.has(f)) : null;
  if (planned) testFiles = planned;
  const argv = {
    _: [], $0: 'jest', ci: true, watchman: false, silent: true, runInBand: true, color: false,
    // Tests can write the cache folder, so a graded run never reads it: Jest keeps transforms in
    // memory between runs of this host instead (keyed by path and mtime).
    cache: !guard, cacheDirectory: CACHE,
    // No reporters: the answer is the JSON we send. Jest's default reporter would also buffer what
    // tests write to stdout in memory, beyond the runner's output cap (a flood killed the host).
    reporters: [],
    // A project's own config may collect coverage (dayjs, commander: #16): grading never needs it,
    // and its report would be written into the workspace, which tests may not change.
    coverage: false, collectCoverage: false,
    // The workspace's own config decides testMatch etc.; these only narrow what runs.
  };
  if (testFiles && testFiles.length) {
    argv.runTestsByPath = true;
    argv._ = testFiles.map((f) => path.resolve(WS, f));
  }
  // A shard of a scoped run may get none of its few files: an empty report, not a failed run.
  if (planned) argv.passWithNoTests = true;
  if (namePattern) argv.testNamePattern = namePattern;
  if (shard) argv.shard = shard; // "i/n": Jest's own split of the run between warm hosts
  const t0 = process.hrtime.bigint();
  // (Without files, runTestsByPath is off and Jest would run every test file: none are run.)
  const { results } = planned && !planned.length ? { results: EMPTY } : await runCLI(argv, [WS]);
  const jestMs = Number(process.hrtime.bigint() - t0) / 1e6;
  const record = guard ? guard.takeRun() : null;
  // Written out now, in the same turn as the guard's last check: a timer a test left behind could
  // otherwise run during the waits below and change what slim() and the writer call.
  const answer = encode({ nonce, report: slim(results), guard: record, jest_ms: jestMs, planned,
    stateful: transformCache.keepsState() });
  // Let what tests wrote reach the runner before the answer does, so its output cap can act:
  // writes to a pipe queue up in this process, and a flood would otherwise outrun the answer.
  await drained(process.stdout);
  await drained(process.stderr);
  rawSend({ nonce, json: answer });
}

// The test files Jest would run, asked on the pristine workspace (no test code runs for this).
async function listTests(nonce) {
  const lines = [];
  const log = console.log;
  console.log = (...a) => { lines.push(a.join(' ')); };
  const argv = { _: [], $0: 'jest', ci: true, watchman: false, listTests: true, json: true, cache: !guard,
    cacheDirectory: CACHE };
  try {
    await runCLI(argv, [WS]);
  } finally { console.log = log; }
  const files = JSON.parse(lines.join('\n') || '[]').map((f) => path.relative(WS, f)).sort();
  const { configs } = await require(require.resolve('jest-config', { paths: [JEST] })).readConfigs(argv, [WS]);
  // What the config names (setup files, environments, transforms) is as protected as the tests.
  const named = guard ? [...new Set([].concat(...configs.map(guard.configFiles)))].sort() : [];
  // And so is the tests' own code outside the places tests are named by (test-support.js).
  const roots = files.concat(named).map((f) => path.resolve(WS, f));
  const support = await require('./test-support').supportFiles(JEST, WS, configs, roots);
  send({ nonce, files, config_files: named, support_files: support });
}

// One run of the template the runner wrote (warm-template.js), in a folder no test can write.
async function warm(nonce, dir) {
  // As root, Jest's folders of the template go where the sandbox user cannot write (HOME, which the
  // runner made root's): in TMPDIR they would be root's, and in the way of this host's later runs.
  const cacheDirectory = sandboxUser ? CACHE : path.join(process.env.HOME || dir, `.jest-warm-${process.pid}`);
  const argv = { _: [], $0: 'jest', ci: true, watchman: false, silent: true, runInBand: true, color: false,
    cache: !guard, cacheDirectory, reporters: [] };
  if (guard) guard.beginRun();
  const { results } = await runCLI(argv, [dir]);
  if (guard) guard.takeRun(); // its record is the template's: dropped
  send({ nonce, warmed: results.numPassedTests, code_cache: CODE_CACHE_WRITE ? codeCache.writeAll() : undefined });
}

// An exception nothing catches ends a Jest process, as in stock Jest, while a request is being
// served. Between requests it can only come from a run already answered: a timer its tests left
// (rxjs reports a subscriber's error with `setTimeout(() => { throw err })`: a redux mutant's
// rxjs test did, and the host died under the next request, which failed as `no_result_record`).
// That run's answer stands; the next is not that run's, so the host carries on. jest-circus swaps
// this listener out while a test file runs, attributing such errors to its tests instead, and puts
// back only what its context's copy of `process` lists (none), so it is added again after each run.
let serving = 0;
function onUncaught(e) {
  if (serving > 0) {
    try { fs.writeSync(2, `${(e && e.stack) || e}\n`); } catch (err) { /* stderr closed */ }
    process.exit(1);
  }
}
function served(work) {
  serving++;
  return work.finally(() => {
    serving--;
    if (process.listeners('uncaughtException').indexOf(onUncaught) < 0) process.on('uncaughtException', onUncaught);
  });
}
process.on('uncaughtException', onUncaught);

// ---------------------------------------------------------------- zygote (runner.js `zygote`)
// A zygote runs the template once and then only forks: each child is a new host, as warm as the
// zygote, that has run nothing of any workspace (docs/sandbox.md#forked-hosts).
let forking = process.env.ETAI_ZYGOTE === '1' ? require('./fork.node') : null;
const children = new Set();
let reaper = null;
let forked = false; // this host is a zygote's child

// Children end as the runner kills them; their exit status goes to the runner, which hears of the
// end itself when the child's channel closes.
function reap() {
  for (const pid of children) {
    const r = forking.reap(pid);
    if (!r) continue;
    children.delete(pid);
    process.send({ nonce: 'exited', json: encode({ pid, code: r[1] < 0 ? null : r[1], signal: r[2] || null }) });
  }
  if (!children.size) { clearInterval(reaper); reaper = null; }
}

function forkHost(nonce, tmp) {
  const [pid, channel, output] = forking.fork(CHANNEL_FD);
  if (pid === 0) return becomeChild(tmp);
  children.add(pid);
  if (!reaper) reaper = setInterval(reap, 50);
  // Handed on unread: a readable socket would start reading what the child sends the runner.
  const net = require('net');
  process.send({ nonce, json: encode({ pid, kind: 'channel' }) }, new net.Socket({ fd: channel, readable: false, writable: false }));
  process.send({ nonce, json: encode({ pid, kind: 'output' }) }, new net.Socket({ fd: output, readable: false, writable: false }));
}

// What a child must not keep of its zygote: the fork itself, the zygote's children and reaper, its
// process ids and TMPDIR (each host has its own), the guard's secrets. Node's exit would wait for worker threads
// that only the zygote has, so a child ends with _exit: asked to (process.exit) or when the runner
// is gone.
function becomeChild(tmp) {
  const exit = forking.exit;
  forking = null;
  forked = true;
  // Node read both ids once, at start: they are the zygote's. A test that signals its own process
  // (`process.kill(process.pid)`) would signal the zygote; two hosts would share temporary names.
  const zygotePid = process.pid;
  Object.defineProperty(process, 'pid', { value: Number(fs.readlinkSync('/proc/self')), writable: false, enumerable: true, configurable: true });
  process.ppid = zygotePid;
  children.clear();
  if (reaper) { clearInterval(reaper); reaper = null; }
  process.env.TMPDIR = tmp;
  CACHE = path.join(tmp, 'jest-cache');
  process.reallyExit = (code) => exit(code | 0);
  process.on('disconnect', () => exit(0));
  if (guard) guard.afterFork();
}

process.on('message', (m) => {
  const nonce = m.nonce;
  if (m.op === 'fork') {
    if (!forking) return send({ nonce, error: 'not a zygote' });
    try {
      forkHost(nonce, String(m.tmp));
    } catch (e) {
      if (forking) send({ nonce, error: String((e && e.message) || e) });
    }
    return;
  }
  if (forking && m.op !== 'warm' && m.op !== 'paths') return send({ nonce, error: 'a zygote only forks' });
  // Every other request looks at the workspace: from here on this host is the sandbox user's.
  if (m.op !== 'warm' && m.op !== 'paths') {
    try { asSandboxUser(); } catch (e) { process.exit(70); } // never serve the workspace as root
  }
  if (m.op === 'warm') {
    served(warm(nonce, m.dir)).catch((e) => send({ nonce, warmed: 0, error: String((e && e.stack) || e).slice(0, 4000) }));
    return;
  }
  // Where this realm looks for modules and what it loaded (tests/harness/test_host_realm.py).
  if (m.op === 'paths') {
    send({ nonce, paths: guard ? guard.hostPaths() : null, code_cache: codeCache.stats(), forked });
    return;
  }
  // Test files and config-named files of the pristine workspace, as the runner listed them at init.
  if (guard && Array.isArray(m.protected)) guard.addProtected(m.protected);
  // The workspace as the runner set it up, once per host, before this host first loads the config.
  if (guard && m.pristine) guard.setPristine(m.pristine);
  // This session's tokens for the transform store, with the same first request (transform-cache.js).
  if (m.transform_keys) transformCache.setKeys(m.transform_keys);
  if (m.sealed) sealed.serve(m.sealed);
  const work = served(m.op === 'list' ? listTests(nonce) : run(nonce, m.test_files, m.name_pattern, m.shard, m.related, m.scope, m.project_tests));
  work.catch((e) => {
    // Jest failed as a whole (a config that threw, or a file the guard refused to load): the guard's
    // record still goes back, since what it refused decides the status.
    const record = guard && m.op !== 'list' ? guard.takeRun() : null;
    send({ nonce, report: null, error: String((e && e.stack) || e).slice(0, 4000), guard: record });
  });
});

// The framework half of the guard: fixing jest-circus and expect inside one test file's context, and
// keeping a record of every test's outcome and passing assertions that workspace code cannot reach.
//
// Called by guard.js (when the runtime is made: lockEarly) and by jest-circus's adapter as guard.js
// amends it (arm after the framework is initialised, relock after setup files and after the test
// file loaded, fileEnd after the tests ran). Everything here runs in the host realm; the test context's
// objects are only read and locked.
'use strict';

const fs = require('fs');
const path = require('path');
const crypto = require('crypto');

const { pinned } = require('./guard-lockdown');

const { apply, defineProperty, getOwnPropertyDescriptor, ownKeys, getPrototypeOf } = Reflect;
const weakHas = WeakSet.prototype.has;
const weakAdd = WeakSet.prototype.add;
// Defined, not assigned: `push` would call a setter planted at that index on Array.prototype.
const push = (arr, x) => defineProperty(arr, arr.length, { value: x, writable: true, enumerable: true, configurable: true });

const GLOBAL_NAMES = ['expect', 'test', 'it', 'describe', 'fit', 'fdescribe', 'xit', 'xtest', 'xdescribe',
  'beforeAll', 'beforeEach', 'afterAll', 'afterEach'];
const MATCHERS_OBJECT = Symbol.for('$$jest-matchers-object');

// The guard's own functions this module calls (tamperIn, checkHost, isProxy, lastRefusal), handed
// over once by guard.js, which requires this module: a require back would make the two a circle.
let guardModule = null;
function guard() { return guardModule; }
function connect(functions) { if (!guardModule) guardModule = Object.freeze({ ...functions }); }

// A file of a package of the Jest install (package.json "exports" hide build files from resolve).
// Resolved once: Node's resolution costs more than a whole guard step.
const resolved = new Map();

function pkgFile(fromDir, pkg, rel) {
  const key = `${fromDir}\u0000${pkg}\u0000${rel}`;
  if (!resolved.has(key)) {
    resolved.set(key, path.join(path.dirname(require.resolve(`${pkg}/package.json`, { paths: [fromDir] })), rel));
  }
  return resolved.get(key);
}

// ------------------------------------------------------------------ framework sources, amended
// Three framework files are loaded into the test context with a small amendment each; the amended
// text must be found exactly, or the host refuses to start (a Jest upgrade must re-check these).
function sourceTransforms(jestDir) {
  const file = (pkg, rel) => pkgFile(jestDir, pkg, rel);
  const expectDir = path.dirname(file('expect', 'package.json'));
  const amend = (p, edits) => {
    let text = fs.readFileSync(p, 'utf8');
    for (const [from, to, count] of edits) {
      const n = text.split(from).length - 1;
      if (n !== count) throw new Error(`etai guard: ${p} changed (expected ${count} x ${JSON.stringify(from)}, found ${n})`);
      text = text.split(from).join(to);
    }
    return text;
  };
  const HOOKS = "'use strict';\nconst __etaiGuard = require('etai-guard-hooks');";
  const out = new Map();
  // jest-circus keeps its whole state (every test, its errors, its function) on a property of the
  // global object, where any module can find it with Object.getOwnPropertySymbols: keep it in the
  // module's closure instead.
  out.set(file('jest-circus', 'build/state.js'), amend(file('jest-circus', 'build/state.js'), [
    ['global[_types.STATE_SYM]', '__etaiState', 3],
    ['const resetState = () => {', 'let __etaiState;\nconst resetState = () => {', 1],
  ]));
  // Every asymmetric matcher reports who made it; equals() honours only those made by tests or by
  // the framework, never one that workspace code put into a received value.
  out.set(path.join(expectDir, 'build/asymmetricMatchers.js'), amend(path.join(expectDir, 'build/asymmetricMatchers.js'), [
    ["'use strict';", HOOKS, 1],
    ['    this.inverse = inverse;\n  }', '    this.inverse = inverse;\n    __etaiGuard.created(this);\n  }', 1],
    // ... and their classes take no new methods from anyone (workspace code reaches them through
    // any matcher it is handed: Object.getPrototypeOf(expect.any(Number))).
    ['exports.notCloseTo = notCloseTo;', 'exports.notCloseTo = notCloseTo; [AsymmetricMatcher, Any, Anything, '
      + 'ArrayContaining, ObjectContaining, StringContaining, StringMatching, CloseTo].forEach((c) => '
      + 'Object.freeze(c.prototype));', 1],
  ]));
  // Every matcher call, table matchers and the promise forms of toThrow alike: checks before it
  // runs, and the guard's own count of passing assertions (and of failures a snapshot matcher
  // asked to defer) beside expect's, which workspace code can reach through expect.setState.
  out.set(path.join(expectDir, 'build/index.js'), amend(path.join(expectDir, 'build/index.js'), [
    ["'use strict';", HOOKS, 1],
    ['  function throwingMatcher(...args) {', '  function throwingMatcher(...args) { __etaiGuard.before(args);', 1],
    ['    const processResult = (result, asyncError) => {', '    const processResult = (result, asyncError) => { __etaiGuard.result();', 1],
    ['(0, _jestMatchersObject.getState)().suppressedErrors.push(error);',
      '(0, _jestMatchersObject.getState)().suppressedErrors.push(error); __etaiGuard.suppressed();', 1],
    ['(0, _jestMatchersObject.getState)().numPassingAsserts++;',
      '(0, _jestMatchersObject.getState)().numPassingAsserts++; __etaiGuard.passed();', 1],
  ]));
  // The matcher table is a frozen object the guard swaps for a bigger frozen one on expect.extend,
  // refusing a name it already has (locking 75 entries one by one cost more than a whole run).
  out.set(path.join(expectDir, 'build/jestMatchersObject.js'), amend(path.join(expectDir, 'build/jestMatchersObject.js'), [
    ["'use strict';", HOOKS, 1],
    ['  Object.assign(globalThis[JEST_MATCHERS_OBJECT].matchers, matchers);', '  __etaiGuard.addMatchers(matchers);', 1],
  ]));
  const utils = pkgFile(expectDir, '@jest/expect-utils', 'build/jasmineUtils.js');
  out.set(utils, amend(utils, [
    ["'use strict';", HOOKS, 1],
    ["return !!obj && isA('Function', obj.asymmetricMatch);", "return !!obj && isA('Function', obj.asymmetricMatch) && __etaiGuard.honoured(obj);", 1],
  ]));
  return out;
}

// The frames of an asymmetric matcher's own making: its classes' constructors and the factories
// (asymmetricMatchers.js; a custom one's class lives in jestMatchersObject.js).
let matcherFiles = null;

function factoryNames(state) {
  const names = [];
  const { expect } = state;
  if (!expect) return names;
  for (const obj of [expect, expect.not]) {
    const keys = ownKeys(obj);
    for (let i = 0; i < keys.length; i++) if (typeof keys[i] === 'string') push(names, keys[i]);
  }
  return names;
}

// The object the amended framework files require as 'etai-guard-hooks', one per test file.
function hooks(runtime) {
  const trusted = new WeakSet();
  const untrusted = new WeakSet();
  const state = runtime._etai;
  state.counter = { passed: 0, suppressedFailures: 0 };
  state.testers = []; // what expect.addEqualityTesters added, in order
  const tamper = (what) => guard().tamperIn(state.rec, what);
  if (!matcherFiles) {
    const dir = path.dirname(pkgFile(state.jestDir, 'expect', 'package.json'));
    matcherFiles = [path.join(dir, 'build', 'asymmetricMatchers.js'), path.join(dir, 'build', 'jestMatchersObject.js')];
  }
  const ownFrame = (f) => f === matcherFiles[0] || f === matcherFiles[1];
  const made = Object.freeze({
    // Honoured in comparisons only when a trusted file's code wrote the call that made it
    // (`expect.any(Number)` in a test): see guard.js `trustedCall`.
    created(matcher) {
      const mine = state.arming; // the guard's own, made while arming
      const ok = mine || state.trustedCall(made.created, factoryNames(state), ownFrame);
      apply(weakAdd, ok ? trusted : untrusted, [matcher]);
      if (typeof matcher.sample === 'function' && customHasInstance(runtime, matcher.sample)) {
        tamper('an asymmetric matcher was given a class whose instanceof answer is rewritten (Symbol.hasInstance)');
      }
    },
    honoured(obj) {
      if (apply(weakHas, trusted, [obj])) {
        // The class may have been given an instanceof answer since the matcher was made.
        if (typeof obj.sample === 'function' && customHasInstance(runtime, obj.sample)) {
          tamper('an asymmetric matcher was given a class whose instanceof answer is rewritten (Symbol.hasInstance)');
        }
        return true;
      }
      if (apply(weakHas, untrusted, [obj])) tamper('an asymmetric matcher made by workspace code reached a comparison');
      return false;
    },
    before(args) {
      const { table, testers, snapshotState } = state;
      if (!table) return; // the framework is still loading
      const now = table.customEqualityTesters;
      let changed = now.length !== testers.length;
      for (let i = 0; !changed && i < testers.length; i++) changed = now[i] !== testers[i];
      if (changed) {
        tamper('custom equality testers were changed outside expect.addEqualityTesters');
      }
      if (snapshotState && table.state.snapshotState !== snapshotState) {
        tamper("a matcher ran against a snapshot state that is not the test file's");
      }
      for (const a of args) {
        if (typeof a === 'function' && customHasInstance(runtime, a)) {
          tamper('a matcher was given a class whose instanceof answer is rewritten (Symbol.hasInstance)');
        }
      }
    },
    addMatchers(matchers) {
      const table = state.table || globalThis0(runtime)[MATCHERS_OBJECT];
      if (!state.table) { // the framework itself, while it loads: as stock expect does it
        Object.assign(table.matchers, matchers);
        return;
      }
      const current = table.matchers;
      for (const key of ownKeys(matchers)) {
        if (key in current) {
          tamper(`expect.extend() gave the matcher ${String(key)} another implementation`);
          throw new TypeError(`etai: the matcher ${String(key)} is already defined`);
        }
      }
      state.setTable(Object.freeze(Object.assign(Object.create(null), current, matchers)));
    },
    // At each assertion, the test context only: matchers compute in it. The host realm's watched
    // prototypes decide nothing during an assertion (the guard's hooks do not go through them, see
    // guard.js `pinned`), so a change there is read back at the file's end and the run's.
    result() { watched(state); },
    passed() { state.counter.passed += 1; },
    suppressed() { state.counter.suppressedFailures += 1; },
  });
  return made;
}

function globalThis0(runtime) { return runtime._environment.global; }

// What guard-lockdown.js watches rather than locks (Array.prototype, iterators), in this test file's
// context and (at the file's end) the host realm, read back: a change is reported once. The host
// realm is read at the file's start and end and the run's: its code that builds results runs
// after the file's tests (checked at fileEnd, before it does) and after the run (takeRun); a change
// that persists is seen there, one made and undone within a file is not seen at a test's end either.
function watched(state, host = false) {
  const changed = state.check && state.check();
  if (changed) guard().tamperIn(state.rec, `${changed} was replaced (test context)`);
  if (host) guard().checkHost();
}

// ------------------------------------------------------------------ locking
function lockProps(obj, keys) {
  for (const key of keys || ownKeys(obj)) {
    const d = getOwnPropertyDescriptor(obj, key);
    if (!d || !d.configurable) continue;
    if ('value' in d) d.writable = false;
    d.configurable = false;
    defineProperty(obj, key, d);
  }
}

// Like lockProps, but an assignment is reported as well as refused (for the names tampering goes
// for first: the framework's globals and the matcher table).
function lockReporting(obj, rec, label, keys) {
  for (const key of keys || ownKeys(obj)) {
    const d = getOwnPropertyDescriptor(obj, key);
    if (!d || !d.configurable || !('value' in d)) continue;
    const value = d.value;
    const what = `${label} ${String(key)}`;
    defineProperty(obj, key, {
      get() { return value; },
      set() {
        guard().tamperIn(rec, `assigned ${what}`);
        throw new TypeError(`etai: ${what} may not be replaced in a graded run`);
      },
      enumerable: d.enumerable, configurable: false,
    });
  }
}

function freezeChain(proto, stopAt) {
  while (proto && proto !== stopAt && !Object.isFrozen(proto)) {
    Object.freeze(proto);
    proto = getPrototypeOf(proto);
  }
}

// Right after the framework is loaded, before any setup file: the matcher table's slots and the
// built-in matchers (a matcher's name, once locked, cannot be given another implementation).
function lockEarly(runtime, g, rec) {
  const table = g[MATCHERS_OBJECT];
  if (!table || typeof table !== 'object') throw new Error('etai guard: expect did not create its matcher table');
  let current = Object.freeze(table.matchers);
  defineProperty(table, 'matchers', {
    get: () => current,
    set() {
      guard().tamperIn(rec, "assigned expect's matcher table");
      throw new TypeError("etai: expect's matcher table may not be replaced in a graded run");
    },
    enumerable: true, configurable: false,
  });
  runtime._etai.setTable = (next) => { current = next; };
  lockProps(table, ['state', 'customEqualityTesters']);
  runtime._etai.table = table;
  runtime._etai.Date = g.Date;
}

// After setup files and after the test file loaded: what they added (custom matchers, custom
// asymmetric matchers on expect) is locked like the built-ins.
function relock(runtime) {
  const { expect } = runtime._etai;
  runtime._etai.setupDone = true; // the first call comes after the setup files, before the test file
  watched(runtime._etai); // also just before the test file is loaded and compiled
  const size = expect ? ownKeys(expect).length + ownKeys(expect.not).length : 0;
  if (size === runtime._etai.size) return; // nothing was added since the last lock: nothing to do
  runtime._etai.size = size;
  lockProps(expect);
  lockProps(expect.not);
}

// A class whose `instanceof` answer was rewritten from outside it: an own Symbol.hasInstance
// anywhere on its chain other than Function.prototype's own (of either realm) that is not a static
// method written in the body of the class that holds it, or a Proxy (whose traps could answer
// anything). A class's own `static [Symbol.hasInstance](v) {...}` (a brand check) is part of what
// the class means: the program's own `instanceof` answers with it too, so a test's matcher may.
// What is refused is one planted on classes after they were made (Object.defineProperty from a
// wrapper, which is how one line can make every class claim every value): its source text is not
// inside the class's. Read with the host realm's Function.prototype.toString, taken at load.
const HOST_HAS_INSTANCE = Function.prototype[Symbol.hasInstance];
const fnText = Function.prototype.toString;
const { indexOf: strIndexOf, startsWith: strStartsWith, slice: strSlice } = String.prototype;
const regTest = RegExp.prototype.test;
const SPACE = pinned(/\s/);
const IDENT_CHAR = pinned(/[\w$]/);

// `fn`'s source is a computed method `[Symbol.hasInstance](...) {...}` that stands in the text of the
// class `holder` right after the word `static`.
function staticMethodOf(holder, fn) {
  if (typeof fn !== 'function' || typeof holder !== 'function' || guard().isProxy(fn) || guard().isProxy(holder)) return false;
  let body;
  let text;
  try {
    body = apply(fnText, holder, []);
    text = apply(fnText, fn, []);
  } catch (e) {
    return false;
  }
  if (!apply(strStartsWith, body, ['class']) || !apply(strStartsWith, text, ['['])) return false;
  const key = apply(strSlice, text, [0, apply(strIndexOf, text, [']']) + 1]);
  if (apply(strIndexOf, key, ['Symbol.hasInstance']) < 0) return false;
  for (let at = apply(strIndexOf, body, [text]); at >= 0; at = apply(strIndexOf, body, [text, at + 1])) {
    let i = at - 1;
    while (i >= 0 && apply(regTest, SPACE, [body[i]])) i--;
    if (i >= 6 && apply(strSlice, body, [i - 5, i + 1]) === 'static' && !apply(regTest, IDENT_CHAR, [body[i - 6]])) return true;
  }
  return false;
}

function customHasInstance(runtime, cls) {
  const realmDefault = runtime._environment.global.Function.prototype[Symbol.hasInstance];
  for (let c = cls; c; c = getPrototypeOf(c)) {
    if (guard().isProxy(c)) return true;
    const d = getOwnPropertyDescriptor(c, Symbol.hasInstance);
    if (d) return !(d.value === realmDefault || d.value === HOST_HAS_INSTANCE || staticMethodOf(c, d.value));
  }
  return false;
}

// ------------------------------------------------------------------ after initialize()
function arm(runtime, environment, config, globals, snapshotState) {
  if (!runtime._etai) throw new Error('etai guard: this runtime is not the guarded one (a custom `runtime` in the Jest config?)');
  const rec = runtime._etai.rec;
  const g = environment.global;
  const jestExpect = runtime._etai.expect = runtimeExpect(runtime);
  runtime._etai.snapshotState = snapshotState;
  lockProps(jestExpect.getState(), ['snapshotState']);
  // Calls that only tests and setup files make; from workspace code they are tampering.
  // Allowed only as a call that a test file, a setup file or a read-only dependency wrote
  // (guard.js `trustedCall`): never from a promise job, a timer, a getter or a trap.
  const onlyTests = (name, what, after) => {
    const real = jestExpect[name];
    if (typeof real !== 'function') return;
    const wrapper = function (...args) {
      if (!runtime._etai.trustedCall(wrapper, [name])) {
        guard().tamperIn(rec, `expect.${name}() ${what} (${guard().lastRefusal()})`);
        throw new Error(`etai: expect.${name} may only be called from test files in a graded run`);
      }
      const out = apply(real, this, args);
      if (after) after(...args);
      return out;
    };
    jestExpect[name] = wrapper;
  };
  onlyTests('extend', 'not called by a test file');
  onlyTests('addEqualityTesters', 'not called by a test file', (list) => {
    for (const t of list) push(runtime._etai.testers, t);
  });
  onlyTests('addSnapshotSerializer', 'not called by a test file');
  // expect.setState and extractExpectedAssertionsErrors stay open: what they change (expect's own
  // counts, deferred failures) is not what the verdict reads (the guard's counts, locked
  // snapshotState), and the framework calls them several times a test.
  lockProps(jestExpect);
  lockProps(jestExpect.not);
  // The classes behind what expect hands out (the asymmetric matchers' are frozen where they are
  // defined: see sourceTransforms).
  freezeChain(getPrototypeOf(snapshotState), g.Object.prototype);
  const AssertionError = loaded(runtime, pkgFile(runtime._etai.jestDir, 'expect', 'build/index.js')).JestAssertionError;
  if (AssertionError) freezeChain(AssertionError.prototype, g.Error.prototype);
  // The globals the test file will call, and the functions behind them.
  for (const name of GLOBAL_NAMES) {
    const want = name === 'expect' ? jestExpect : globals[name];
    if (typeof want !== 'function') continue;
    if (name !== 'expect') { // test.each, test.only.each, describe.skip, ...: nothing is added to these
      for (const key of ownKeys(want)) if (typeof want[key] === 'function') Object.freeze(want[key]);
      Object.freeze(want);
    }
    if (!config.injectGlobals) continue;
    const d = getOwnPropertyDescriptor(g, name);
    if (!d || d.value !== want) {
      guard().tamperIn(rec, `the global ${name} is not the framework's`);
      continue;
    }
    if (name === 'expect') globalExpect(runtime, g, rec, d);
    else lockReporting(g, rec, 'the global', [name]);
  }
  runtime._etai.size = ownKeys(jestExpect).length + ownKeys(jestExpect.not).length;
  addRecorder(runtime, rec);
}

// The global `expect`, locked like the other globals but for one case: a setup file that makes
// another library's `expect` the global one (`global.expect = require('chai').expect` in a
// setupFilesAfterEnv file). Accepted only while the setup files load (before the test file), from a
// statement `x.expect = value` that a trusted file wrote (the frame right below this setter: guard.js
// `trustedAssignment`), and for a function that is not a Proxy. What it counts: nothing. The guard's
// assertion count stays the one of Jest's own `expect` (still `require('@jest/globals').expect`, still
// what the matcher table, the canary and the record use); a test that asserts with the other library
// passes with 0 counted assertions, like one using node's assert, and fails only by the error its
// library throws, which circus records as the test's failure (the gold record then asks for 0).
function globalExpect(runtime, g, rec, d) {
  let current = d.value;
  const setter = function (value) {
    if (!runtime._etai.setupDone && typeof value === 'function' && !guard().isProxy(value)
      && runtime._etai.trustedAssignment(setter, 'expect')) {
      current = value;
      return;
    }
    guard().tamperIn(rec, 'assigned the global expect');
    throw new TypeError('etai: the global expect may not be replaced in a graded run');
  };
  defineProperty(g, 'expect', { get() { return current; }, set: setter, enumerable: d.enumerable, configurable: false });
}

// A framework module the runtime has loaded already (when it was made): read from its internal
// registry, where requireInternalModule would resolve the path again each time.
function loaded(runtime, file) {
  const mod = runtime._internalModuleRegistry.get(file);
  return mod ? mod.exports : runtime.requireInternalModule(file);
}

function runtimeExpect(runtime) {
  const circus = path.dirname(pkgFile(runtime._etai.jestDir, 'jest-circus', 'package.json'));
  return loaded(runtime, pkgFile(circus, '@jest/expect', 'build/index.js')).jestExpect;
}

// ------------------------------------------------------------------ the record of each test
// A circus event handler, added last: it sees each test after circus and expect added their
// errors. Its counter of passing assertions is kept by the amended expect (hooks.passed), over the
// same window as Jest's own numPassingAsserts (reset when a test is done).
function addRecorder(runtime, rec) {
  const state = loaded(runtime, pkgFile(runtime._etai.jestDir, 'jest-circus', 'build/state.js'));
  const counter = runtime._etai.counter;
  const byTest = new Map();
  runtime._etai.byTest = byTest;
  // Jest's own fullName (jest-circus's jestAdapterInit.js): the titles below the root block joined
  // by single spaces, an empty one kept in the middle, the test's own title left out when empty.
  // Any other spelling makes the tally at the file's end disagree with Jest's report.
  const root = state.ROOT_DESCRIBE_BLOCK_NAME || 'ROOT_DESCRIBE_BLOCK';
  const fullName = (test) => {
    const names = []; // innermost first
    for (let t = test; t && t.parent; t = t.parent) if (t.name !== root) push(names, t.name);
    const last = names.length && names[0] === '' ? 1 : 0;
    let out = ''; // no array method: see guard.js `pinned`
    for (let i = names.length - 1; i >= last; i--) out += (i < names.length - 1 ? ' ' : '') + names[i];
    return out;
  };
  state.addEventHandler((event) => {
    const t = event.test;
    switch (event.name) {
      case 'test_done':
        watched(runtime._etai);
        byTest.set(t, {
          name: fullName(t), status: t.errors.length ? 'failed' : 'passed', asserts: counter.passed,
          jest_asserts: t.numPassingAsserts, suppressed: counter.suppressedFailures,
        });
        counter.passed = 0;
        counter.suppressedFailures = 0;
        break;
      case 'test_skip':
        byTest.set(t, { name: fullName(t), status: 'pending', asserts: 0 });
        break;
      case 'test_todo':
        byTest.set(t, { name: fullName(t), status: 'todo', asserts: 0 });
        break;
      default:
    }
  });
}

// ------------------------------------------------------------------ end of a test file
// The canary: the test file's own matchers, on values no workspace code has seen, must still fail
// what is false and pass what is true (called straight from the matcher table with a trusted
// context: going through expect() would build an error with a stack for every call); then Jest's
// results must agree with our record, test by test.
let canarySeed = 0;
// Drawn anew in every host, a forked one too (jest-host.js `becomeChild`): the agent's host and the
// graded one are copies of one zygote, and a seed they shared would tell the agent's code which
// values the canary will ask about.
function reseed() { canarySeed = crypto.randomBytes(4).readUInt32LE(0) >>> 1; }
reseed();

function fileEnd(runtime, results) {
  const { rec, table, expect } = runtime._etai;
  if (!expect || !runtime._etai.byTest) return;
  watched(runtime._etai, true);
  const a = canarySeed++;
  const RealDate = runtime._etai.Date;
  const m = table.matchers;
  runtime._etai.arming = true;
  const ctx = expect.anything().getMatcherContext();
  runtime._etai.arming = false;
  const verdict = (testers, name, ...args) => {
    ctx.customTesters = testers;
    try {
      return apply(m[name], ctx, args).pass;
    } catch (e) {
      return 'threw';
    }
  };
  // First without the file's equality testers (a test's own may be sloppy about types it does not
  // handle, so "equal" is asked only of values that are): the matchers themselves.
  const pairs = [[{ v: [a], d: new RealDate(a) }, { v: [a], d: new RealDate(a + 1) }], [a, a + 1], [`s${a}`, `s${a + 1}`],
    [[a, 'x'], [a, 'y']], [{ k: a }, { k: a, extra: 1 }]];
  const wrong = [verdict([], 'toBe', a, a + 1), verdict([], 'toEqual', pairs[0][0], pairs[0][1])];
  const right = [verdict([], 'toEqual', { v: [a], d: new RealDate(a) }, { v: [a], d: new RealDate(a) })];
  // From here on, indexed loops and Map.prototype.forEach only (see guard.js `pinned`).
  if (wrong[0] !== false || wrong[1] !== false || right[0] !== true) {
    guard().tamperIn(rec, "the test file's matchers no longer tell true from false (checked at its end)");
  }
  // Then with the testers the file's assertions ran with: none may call unequal values equal.
  const testers = runtime._etai.testers;
  if (testers.length) {
    for (let i = 0; i < pairs.length; i++) {
      const copy = [];
      for (let j = 0; j < testers.length; j++) push(copy, testers[j]);
      if (verdict(copy, 'toEqual', pairs[i][0], pairs[i][1]) !== false) {
        guard().tamperIn(rec, 'a custom equality tester calls values equal that are not (checked at the file\'s end)');
        break;
      }
    }
  }
  const records = [];
  runtime._etai.byTest.forEach((r) => push(records, r));
  const theirs = results.testResults || [];
  const tally = (list, nameOf) => {
    const m = new Map();
    for (let i = 0; i < list.length; i++) {
      const key = `${list[i].status}\u0000${nameOf(list[i])}`;
      m.set(key, (m.get(key) || 0) + 1);
    }
    return m;
  };
  const o = tally(records, (r) => r.name);
  const t = tally(theirs, (r) => r.fullName);
  let same = o.size === t.size;
  o.forEach((n, k) => { if (t.get(k) !== n) same = false; });
  if (!same) guard().tamperIn(rec, "Jest's report and the trusted record of this file's tests disagree");
  for (let i = 0; i < records.length; i++) {
    const r = records[i];
    if (r.status === 'passed' && r.jest_asserts !== r.asserts) {
      guard().tamperIn(rec, `expect's assertion count was changed during "${r.name}"`);
    }
    if (r.status === 'passed' && r.suppressed) {
      guard().tamperIn(rec, `a failed assertion was dropped from "${r.name}"`);
    }
    push(rec.tests, { name: r.name, status: r.status, asserts: r.asserts });
  }
  rec.checked = true;
}

module.exports = { connect, sourceTransforms, hooks, lockEarly, arm, relock, fileEnd, reseed };

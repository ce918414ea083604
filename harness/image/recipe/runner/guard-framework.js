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

const { apply, defineProperty, getOwnPropertyDescriptor, ownKeys, getPrototypeOf } = Reflect;
const weakHas = WeakSet.prototype.has;
const weakAdd = WeakSet.prototype.add;
const arrayPush = Array.prototype.push;
const push = (arr, x) => apply(arrayPush, arr, [x]);

const GLOBAL_NAMES = ['expect', 'test', 'it', 'describe', 'fit', 'fdescribe', 'xit', 'xtest', 'xdescribe',
  'beforeAll', 'beforeEach', 'afterAll', 'afterEach'];
const MATCHERS_OBJECT = Symbol.for('$$jest-matchers-object');
const INSTANCE_MATCHERS = new Set(['toThrow', 'toThrowError', 'toBeInstanceOf']);
const SNAPSHOT_MATCHERS = new Set(['toMatchSnapshot', 'toMatchInlineSnapshot', 'toThrowErrorMatchingSnapshot',
  'toThrowErrorMatchingInlineSnapshot']);

function guard() { return require('./guard'); }

// A file of a package of the Jest install (package.json "exports" hide build files from resolve).
function pkgFile(fromDir, pkg, rel) {
  return path.join(path.dirname(require.resolve(`${pkg}/package.json`, { paths: [fromDir] })), rel);
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
  ]));
  const utils = pkgFile(expectDir, '@jest/expect-utils', 'build/jasmineUtils.js');
  out.set(utils, amend(utils, [
    ["'use strict';", HOOKS, 1],
    ["return !!obj && isA('Function', obj.asymmetricMatch);", "return !!obj && isA('Function', obj.asymmetricMatch) && __etaiGuard.honoured(obj);", 1],
  ]));
  return out;
}

// The object the amended framework files require as 'etai-guard-hooks', one per test file.
function hooks(rec, workspaceCaller) {
  const trusted = new WeakSet();
  const untrusted = new WeakSet();
  return Object.freeze({
    created(matcher) {
      const g = guard();
      apply(weakAdd, g.untrusted(workspaceCaller(rec)) ? untrusted : trusted, [matcher]);
    },
    honoured(obj) {
      if (apply(weakHas, trusted, [obj])) return true;
      if (apply(weakHas, untrusted, [obj])) {
        guard().tamperIn(rec, 'an asymmetric matcher made by workspace code reached a comparison');
      }
      return false;
    },
  });
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

function freezeChain(proto, stopAt) {
  while (proto && proto !== stopAt && !Object.isFrozen(proto)) {
    Object.freeze(proto);
    proto = getPrototypeOf(proto);
  }
}

// Right after the framework is loaded, before any setup file: the matcher table's slots.
function lockEarly(runtime, g, rec) {
  const table = g[MATCHERS_OBJECT];
  if (!table || typeof table !== 'object') throw new Error('etai guard: expect did not create its matcher table');
  lockProps(table, ['matchers', 'state', 'customEqualityTesters']);
  runtime._etai.table = table;
  runtime._etai.counter = { passed: 0, suppressedFailures: 0 };
  runtime._etai.testers = []; // what expect.addEqualityTesters added, in order
  runtime._etai.Date = g.Date;
  guardMatchers(runtime, rec);
}

// After setup files and after the test file loaded: what they added (custom matchers, custom
// asymmetric matchers on expect) is locked like the built-ins.
function relock(runtime) {
  guardMatchers(runtime, runtime._etai.rec);
  if (runtime._etai.expect) {
    lockProps(runtime._etai.expect);
    lockProps(runtime._etai.expect.not);
  }
}

// Wrap every matcher in the table that is not wrapped yet, then lock every entry. A matcher's name,
// once locked, cannot be given another implementation (expect.extend or a direct write).
function guardMatchers(runtime, rec) {
  const { table } = runtime._etai;
  const matchers = table.matchers;
  const done = runtime._etai.wrapped || (runtime._etai.wrapped = new WeakSet());
  for (const name of ownKeys(matchers)) {
    const d = getOwnPropertyDescriptor(matchers, name);
    if (!d.configurable) continue;
    const wrapped = apply(weakHas, done, [d.value]) ? d.value : guardMatcher(runtime, rec, String(name), d.value);
    apply(weakAdd, done, [wrapped]);
    defineProperty(matchers, name, { value: wrapped, writable: false, configurable: false, enumerable: d.enumerable });
  }
}

function guardMatcher(runtime, rec, name, matcher) {
  const counter = runtime._etai.counter;
  const testers = runtime._etai.table.customEqualityTesters;
  const ours = runtime._etai.testers;
  const wrapped = function (...args) {
    const ctx = this;
    if (testers.length !== ours.length || ours.some((t, i) => testers[i] !== t)) {
      guard().tamperIn(rec, 'custom equality testers were changed outside expect.addEqualityTesters');
    }
    if (SNAPSHOT_MATCHERS.has(name) && ctx && runtime._etai.snapshotState && ctx.snapshotState !== runtime._etai.snapshotState) {
      guard().tamperIn(rec, `${name} ran against a snapshot state that is not the test file's`);
    }
    if (INSTANCE_MATCHERS.has(name) && typeof args[1] === 'function' && customHasInstance(runtime, args[1])) {
      guard().tamperIn(rec, `${name} was given a class whose instanceof answer is rewritten (Symbol.hasInstance)`);
    }
    let suppressed = false;
    if (ctx && typeof ctx.dontThrow === 'function') {
      const dontThrow = ctx.dontThrow;
      ctx.dontThrow = () => { suppressed = true; return dontThrow(); };
    }
    const settle = (result) => {
      if (result && typeof result === 'object' && typeof result.pass === 'boolean') {
        if (result.pass !== Boolean(ctx && ctx.isNot)) counter.passed += 1;
        else if (suppressed) counter.suppressedFailures += 1;
      }
      return result;
    };
    let result;
    try {
      result = apply(matcher, ctx, args);
    } catch (e) {
      throw require('./jest-warm').unframed(e, [__filename]);
    }
    return result && typeof result.then === 'function' ? result.then(settle) : settle(result);
  };
  for (const key of ownKeys(matcher)) {
    if (key !== 'length' && key !== 'name' && key !== 'prototype') defineProperty(wrapped, key, getOwnPropertyDescriptor(matcher, key));
  }
  defineProperty(wrapped, 'name', { value: matcher.name });
  return wrapped;
}

// A class whose `instanceof` answer its author rewrote: an own Symbol.hasInstance anywhere on its
// chain below the realm's Function.prototype, or a Proxy (whose traps could answer anything).
function customHasInstance(runtime, cls) {
  const fnProto = runtime._environment.global.Function.prototype;
  for (let c = cls; c && c !== fnProto; c = getPrototypeOf(c)) {
    if (guard().isProxy(c) || getOwnPropertyDescriptor(c, Symbol.hasInstance)) return true;
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
  const onlyTests = (name, what, after) => {
    const real = jestExpect[name];
    if (typeof real !== 'function') return;
    jestExpect[name] = function (...args) {
      if (guard().calledFromWorkspaceCode(rec)) {
        guard().tamperIn(rec, `expect.${name}() ${what}`);
        throw new Error(`etai: expect.${name} may only be called from test files in a graded run`);
      }
      const out = apply(real, this, args);
      if (after) after(...args);
      return out;
    };
  };
  onlyTests('extend', 'from workspace code');
  onlyTests('addEqualityTesters', 'from workspace code', (list) => {
    for (const t of list) push(runtime._etai.testers, t);
  });
  onlyTests('addSnapshotSerializer', 'from workspace code');
  onlyTests('setState', 'from workspace code');
  onlyTests('extractExpectedAssertionsErrors', 'from workspace code');
  lockProps(jestExpect);
  lockProps(jestExpect.not);
  // The classes behind what expect hands out: asymmetric matchers and assertion errors.
  for (const m of [jestExpect.any(Function), jestExpect.anything(), jestExpect.arrayContaining([]),
    jestExpect.objectContaining({}), jestExpect.stringContaining(''), jestExpect.stringMatching(''),
    jestExpect.closeTo(0)]) {
    freezeChain(getPrototypeOf(m), g.Object.prototype);
  }
  freezeChain(getPrototypeOf(snapshotState), g.Object.prototype);
  const AssertionError = runtime.requireInternalModule(pkgFile(runtime._etai.jestDir, 'expect', 'build/index.js')).JestAssertionError;
  if (AssertionError) freezeChain(AssertionError.prototype, g.Error.prototype);
  // The globals the test file will call, and the functions behind them.
  for (const name of GLOBAL_NAMES) {
    const want = name === 'expect' ? jestExpect : globals[name];
    if (typeof want !== 'function') continue;
    for (const key of ownKeys(want)) {
      const v = want[key];
      if (typeof v === 'function' && name !== 'expect') { lockProps(v); }
    }
    if (name !== 'expect') lockProps(want);
    if (!config.injectGlobals) continue;
    const d = getOwnPropertyDescriptor(g, name);
    if (!d || d.value !== want) {
      guard().tamperIn(rec, `the global ${name} is not the framework's`);
      continue;
    }
    defineProperty(g, name, { value: want, writable: false, configurable: false, enumerable: d.enumerable });
  }
  guardMatchers(runtime, rec);
  addRecorder(runtime, rec);
}

function runtimeExpect(runtime) {
  const circus = path.dirname(pkgFile(runtime._etai.jestDir, 'jest-circus', 'package.json'));
  return runtime.requireInternalModule(pkgFile(circus, '@jest/expect', 'build/index.js')).jestExpect;
}

// ------------------------------------------------------------------ the record of each test
// A circus event handler, added last: it sees each test after circus and expect added their
// errors. Its counter of passing assertions is kept by the matcher wrappers, over the same window
// as Jest's own numPassingAsserts (reset when a test is done).
function addRecorder(runtime, rec) {
  const state = runtime.requireInternalModule(pkgFile(runtime._etai.jestDir, 'jest-circus', 'build/state.js'));
  const counter = runtime._etai.counter;
  const byTest = new Map();
  runtime._etai.byTest = byTest;
  const fullName = (test) => {
    const names = [];
    for (let t = test; t && t.parent; t = t.parent) push(names, t.name);
    names.reverse();
    return names.join(' ');
  };
  state.addEventHandler((event) => {
    const t = event.test;
    switch (event.name) {
      case 'test_done':
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
// The canary: the real matchers, on values no workspace code has seen, must still fail what is
// false and pass what is true; then Jest's results must agree with our record, test by test.
function fileEnd(runtime, results) {
  const rec = runtime._etai.rec;
  const expect = runtime._etai.expect;
  if (!expect || !runtime._etai.byTest) return;
  const a = crypto.randomBytes(8).toString('hex');
  const b = crypto.randomBytes(8).toString('hex');
  const counter = runtime._etai.counter;
  const saved = counter.passed;
  const RealDate = runtime._etai.Date;
  // A test's own equality testers may be sloppy about types they do not handle; the canary asks
  // about plain values, so it runs without them (they were checked at every matcher call).
  const testers = runtime._etai.table.customEqualityTesters;
  const savedTesters = testers.splice(0);
  const ours = runtime._etai.testers.splice(0);
  const mustThrow = [
    () => expect(a).toBe(b), () => expect({ v: [a] }).toEqual({ v: [b] }), () => expect([a]).toContain(b),
    () => expect(a).not.toBe(a), () => expect(() => {}).toThrow(), () => expect(new RealDate(1)).toEqual(new RealDate(2)),
    () => expect({ v: a }).toStrictEqual({ v: b }), () => expect(1).toBeCloseTo(2),
  ];
  for (const f of mustThrow) {
    let threw = false;
    try { f(); } catch (e) { threw = true; }
    if (!threw) guard().tamperIn(rec, 'a false assertion passed at the end of the file (matchers or equality changed)');
  }
  try {
    expect({ v: [a] }).toEqual({ v: [a] });
    expect(a).toBe(a);
  } catch (e) {
    guard().tamperIn(rec, 'a true assertion failed at the end of the file');
  }
  counter.passed = saved;
  for (const t of savedTesters) push(testers, t);
  for (const t of ours) push(runtime._etai.testers, t);
  const records = [];
  for (const r of runtime._etai.byTest.values()) push(records, r);
  const theirs = results.testResults || [];
  const tally = (list) => {
    const m = new Map();
    for (const r of list) {
      const key = `${r.status}\u0000${r.name !== undefined ? r.name : r.fullName}`;
      m.set(key, (m.get(key) || 0) + 1);
    }
    return m;
  };
  const o = tally(records);
  const t = tally(theirs.map((r) => ({ status: r.status, name: r.fullName })));
  let same = o.size === t.size;
  for (const [k, n] of o) if (t.get(k) !== n) same = false;
  if (!same) guard().tamperIn(rec, "Jest's report and the trusted record of this file's tests disagree");
  for (const r of records) {
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

module.exports = { sourceTransforms, hooks, lockEarly, arm, relock, fileEnd };

// Locking a realm's intrinsics, so that code loaded later cannot change what the test framework
// relies on (Object.is, Array.prototype.push, Promise.prototype.then, ...).
//
// A locked property is non-writable and non-configurable. Assigning a locked name on an object that
// merely inherits it (`MyError.prototype.name = 'MyError'`) would then fail too: SES calls this the
// "override mistake". The names ordinary code assigns that way (TAMED, on the prototypes that
// TAMED_ON and SEALED name) therefore stay writable data properties, watched like the objects
// below. SES turns them into getter/setter pairs instead; measured here, a getter on every
// `x.constructor` and `'' + x` cost the Jest step more than all the rest of the guard.
//
// What stays as stock JavaScript has it, because tests legitimately replace it: Date and its
// prototype (jest.spyOn(Date, 'now'), fake timers), Math (spyOn(Math, 'random')), console, process,
// Intl, timers, the global object's own properties, and every non-intrinsic object. Only the few
// Math and Date members that matchers compute with are locked (see SPYABLE_EXCEPT).
//
// Watched, not locked: Array.prototype, RegExp.prototype, Promise and its prototype, and the iterator
// prototypes. Changing those objects in any way takes V8 off its fast paths for every array, regular
// expression, await and for-of in the realm (measured in one process, paired: array-heavy code
// 2-4x slower; a mixed workload +10% with RegExp.prototype frozen, +3% without). The guard reads them back instead (the `check` that
// lockRealm returns) at every assertion result, test end and file end, and reports a change.
// What that does not catch, a change made and undone between two of those points, is written down
// in the README.
'use strict';

const CONSTRUCTORS = ['Object', 'Function', 'Array', 'String', 'Number', 'Boolean', 'Symbol', 'Error', 'TypeError',
  'RangeError', 'Promise', 'RegExp', 'Map', 'Set', 'WeakMap', 'WeakSet', 'ArrayBuffer', 'DataView'];
// Typed arrays' methods live on %TypedArray% and its prototype (in `hidden`). Left as they are,
// because nothing the framework decides with uses them: BigInt, the rarer errors (EvalError,
// ReferenceError, SyntaxError, URIError, AggregateError), WeakRef, FinalizationRegistry,
// SharedArrayBuffer, Atomics. Each lock costs every test file a little.
const NAMESPACES = ['Reflect', 'JSON'];
const WATCHED = new Set(['Array', 'RegExp', 'Promise']); // their prototypes (and Promise itself): see the header
// Statics that Node and Jest assign at run time (stack depth, source maps) stay writable.
// Symbol's statics are all locked, yet Symbol takes new ones: ponyfills add Symbol.observable
// (redux, rxjs: real projects of #16), and a new name cannot replace a well-known symbol.
const STATICS_LEFT = { Error: new Set(['stackTraceLimit', 'prepareStackTrace', 'captureStackTrace']), Symbol: new Set() };
// Spyable objects of which only these members are locked: what matchers compute with.
const SPYABLE_EXCEPT = {
  Math: ['abs', 'pow', 'max', 'min', 'floor'],
  'Date.prototype': ['valueOf', 'getTime', 'toISOString', Symbol.toPrimitive],
};
// Prototypes on which ordinary code assigns inherited names. Error.prototype one property at a time
// (it stays extensible; babel sets fn.toString); the others are sealed in one step, then only the
// names that are not tamed are made read-only. The error types are among them because ES5-style
// subclassing assigns `constructor`, `name` and `toString` on an object that inherits them
// (TypeScript's __extends in bson: `this.constructor = d` on a TypeError.prototype heir). The other
// prototypes are frozen (taming them all this way cost the Jest step ~4%: their methods stop being
// constant to V8), with the few OVERRIDABLE names below made accessors instead.
const TAMED_ON = new Set(['Error.prototype']);
const SEALED = new Set(['Object.prototype', 'Function.prototype', 'TypeError.prototype', 'RangeError.prototype']);
// Object.prototype's own methods are all among them: a module compiled from ES syntax to CommonJS
// assigns each export (`exports.hasOwnProperty = hasOwnProperty`, luxon's src/impl/util.js, #16),
// which a locked inherited name refuses.
const TAMED = new Set(['constructor', 'toString', 'valueOf', 'toLocaleString', 'toJSON', 'name', 'message',
  'hasOwnProperty', 'isPrototypeOf', 'propertyIsEnumerable', '__defineGetter__', '__defineSetter__',
  '__lookupGetter__', '__lookupSetter__']);

// Frozen objects keep these names overridable the way SES's `overrideTaming` does: each becomes a
// getter that answers the original value and a setter that, when the object assigned to is not the
// frozen one itself, defines an own data property there (as an ordinary assignment would have), so
// that `M.prototype = Object.create(Map.prototype); M.prototype.constructor = M` works. Assigning on
// the frozen object itself still fails. The setter grants nothing Reflect.defineProperty on that
// object could not already do (it calls it, and fails where it fails: on a frozen or non-extensible
// object), and the getter cannot be replaced (non-configurable) and closes over the value it had
// when the realm was locked, so every read (the framework's and the guard's) sees that value.
// The names: `constructor` (every ES5-style subclass assigns it), and `toString`, `valueOf`,
// `toLocaleString` (what subclasses and polyfills override: the `buffer` package assigns
// `Buffer.prototype.toString` on a Uint8Array heir). `name` and `message` live on the error types'
// prototypes and Function.prototype, tamed above as watched writable properties. Methods such as
// Map.prototype.get stay plain frozen data: a getter on every `map.get` cost a Map-heavy loop 14%
// (measured in one process, paired), and ES5 code cannot subclass Map's methods anyway
// (`Map.call(this)` throws without `new`).
const OVERRIDABLE = new Set(['constructor', 'toString', 'valueOf', 'toLocaleString']);

// The accessor pair of one overridable name, made in the realm of the object it is on (a getter
// made here would hand that realm's code a function of this realm). Compiled once; the realm's
// Reflect and TypeError are read when the realm is locked, before any of its other code runs.
const OVERRIDE_MAKER = new (require('vm').Script)(`(function () {
  'use strict';
  const { defineProperty, getOwnPropertyDescriptor, apply } = Reflect;
  const hasOwn = Object.prototype.hasOwnProperty;
  const TypeErr = TypeError;
  return function override(obj, key, value, enumerable) {
    const getter = { get [key]() { return value; } };
    const setter = { set [key](v) {
      if (this === obj) throw new TypeErr("Cannot assign to read only property '" + key + "' of object");
      if ((typeof this !== 'object' && typeof this !== 'function') || this === null) {
        throw new TypeErr("Cannot create property '" + key + "' on " + typeof this);
      }
      if (apply(hasOwn, this, [key])) { this[key] = v; return; }
      if (!defineProperty(this, key, { value: v, writable: true, enumerable: true, configurable: true })) {
        throw new TypeErr("Cannot add property " + key + ", object is not extensible");
      }
    } };
    return { get: getOwnPropertyDescriptor(getter, key).get, set: getOwnPropertyDescriptor(setter, key).set,
      enumerable, configurable: false };
  };
})()`);

// Compiled once; run in each realm to make that realm's generator and async functions.
const FUNCTION_KINDS = new (require('vm').Script)('[function* () {}, async function* () {}, async function () {}]');

function hidden(g, context) {
  // Intrinsics without a global name, reached through values made in realm `g`.
  const gp = Object.getPrototypeOf;
  const [gen, agen, afn] = context ? FUNCTION_KINDS.runInContext(context)
    : g.Function('return [function* () {}, async function* () {}, async function () {}]')();
  const arrayIterator = gp(new g.Array()[g.Symbol.iterator]());
  return {
    locked: [gp(gen), gp(gen).prototype, gp(agen), gp(agen).prototype, gp(afn), gp(gp(agen).prototype),
      gp(/x/g[g.Symbol.matchAll]('')), gp(g.Int8Array), gp(g.Int8Array.prototype)],
    watched: [arrayIterator, gp(arrayIterator), gp(new g.Map()[g.Symbol.iterator]()),
      gp(new g.Set()[g.Symbol.iterator]()), gp(''[g.Symbol.iterator].call(''))],
  };
}

function lockProperty(obj, key, label, tamed) {
  const d = Reflect.getOwnPropertyDescriptor(obj, key);
  if (!d || !d.configurable) return;
  if ('value' in d && tamed && TAMED.has(key)) {
    Reflect.defineProperty(obj, key, { value: d.value, writable: true, enumerable: d.enumerable, configurable: false });
    tamed.push([obj, key, label]);
  } else if ('value' in d) {
    Reflect.defineProperty(obj, key, { value: d.value, writable: false, enumerable: d.enumerable, configurable: false });
  } else {
    Reflect.defineProperty(obj, key, { get: d.get, set: d.set, enumerable: d.enumerable, configurable: false });
  }
}

function lockAll(obj, label, skip, tamed, override) {
  if (!skip && !TAMED_ON.has(label) && !SEALED.has(label)) {
    if (override) {
      for (const key of OVERRIDABLE) {
        const d = Reflect.getOwnPropertyDescriptor(obj, key);
        if (d && 'value' in d && d.writable && d.configurable) Reflect.defineProperty(obj, key, override(obj, key, d.value, d.enumerable));
      }
    }
    Object.freeze(obj);  // one call; what follows is the per-property path
    return;
  }
  if (SEALED.has(label)) {
    Object.seal(obj);
    for (const key of Reflect.ownKeys(obj)) {
      const d = Reflect.getOwnPropertyDescriptor(obj, key);
      if (!('value' in d)) continue;
      if (TAMED.has(key)) tamed.push([obj, key, label]);
      else if (d.writable) Reflect.defineProperty(obj, key, { value: d.value, writable: false });
    }
    return;
  }
  for (const key of Reflect.ownKeys(obj)) {
    if (skip && skip.has(key)) continue;
    lockProperty(obj, key, label, tamed);
  }
}

// Every own member of `obj` read-only and fixed, none tamed: for objects of this realm that its own
// code calls into (guard.js lockShared).
function lockMembers(obj) {
  for (const key of Reflect.ownKeys(obj)) if (key !== 'prototype') lockProperty(obj, key, null, null);
}

// Lock the intrinsics of the realm whose global object is `g` (and whose vm context, if it is not
// this realm, is `context`). Returns `check()`: the first watched member that changed since, as a
// name, or null.
function lockRealm(g, { context = null } = {}) {
  const tamed = [];
  const override = context ? OVERRIDE_MAKER.runInContext(context) : OVERRIDE_MAKER.runInThisContext();
  for (const name of CONSTRUCTORS) {
    const C = g[name];
    if (typeof C !== 'function') continue;
    if (name !== 'Promise') lockAll(C, name, STATICS_LEFT[name], tamed, override);
    if (C.prototype && !WATCHED.has(name)) lockAll(C.prototype, `${name}.prototype`, null, tamed, override);
  }
  for (const name of NAMESPACES) if (g[name]) lockAll(g[name], name);
  const { locked, watched } = hidden(g, context);
  for (const obj of locked) lockAll(obj, 'intrinsic', null, null, override);
  for (const key of SPYABLE_EXCEPT.Math) lockProperty(g.Math, key, 'Math', tamed);
  for (const key of SPYABLE_EXCEPT['Date.prototype']) lockProperty(g.Date.prototype, key, 'Date.prototype', tamed);
  // Pollution of Object.prototype or Function.prototype with new names changes every optional-field
  // read in the framework (`if (options.failing)`), so those two take no new properties.
  Object.preventExtensions(g.Object.prototype);
  Object.preventExtensions(g.Function.prototype);
  return watch([[g.Array.prototype, 'Array.prototype'], [g.RegExp.prototype, 'RegExp.prototype'],
    [g.Promise, 'Promise'], [g.Promise.prototype, 'Promise.prototype'],
    ...watched.map((o) => [o, 'an iterator prototype'])], tamed);
}

// Remember every own property (by descriptor: a getter planted later would answer our reads), how
// many there are and the object's prototype; `check` compares. A watched object stays extensible, so
// its prototype can be replaced: a Proxy there answers every name the object lacks (`toJSON`, an
// index past the end) with workspace code.
// `check` runs after workspace code and reads what it watches through nothing it watches: indexed
// loops over records of its own, no iterator, spread, destructuring or Array/RegExp method (a
// `next` planted on the host's array iterator would otherwise end its loop before the first item).
function watch(objects, members) {
  const { getOwnPropertyDescriptor, ownKeys, getPrototypeOf } = Reflect;
  const seen = [];
  for (const [obj, label] of objects) {
    const keys = ownKeys(obj);
    const descs = keys.map((k) => getOwnPropertyDescriptor(obj, k));
    seen.push(Object.freeze({ obj, label, keys: Object.freeze(keys), descs: Object.freeze(descs), proto: getPrototypeOf(obj) }));
  }
  const single = members.map(([obj, key, label]) => Object.freeze({ obj, label, key, value: obj[key] }));
  Object.freeze(seen);
  Object.freeze(single);
  const nSeen = seen.length;
  const nSingle = single.length;
  return function check() {
    for (let j = 0; j < nSeen; j++) {
      const w = seen[j];
      const obj = w.obj;
      const keys = w.keys;
      const n = keys.length;
      if (ownKeys(obj).length !== n) return `${w.label} (a property was added or removed)`;
      if (getPrototypeOf(obj) !== w.proto) return `${w.label} (its prototype was replaced)`;
      for (let i = 0; i < n; i++) {
        const d = getOwnPropertyDescriptor(obj, keys[i]);
        const was = w.descs[i];
        if (!d || d.value !== was.value || d.get !== was.get || d.set !== was.set) return `${w.label}.${String(keys[i])}`;
      }
    }
    for (let j = 0; j < nSingle; j++) {
      const m = single[j];
      if (getOwnPropertyDescriptor(m.obj, m.key).value !== m.value) return `${m.label}.${String(m.key)}`;
    }
    return null;
  };
}

// A regular expression of the guard's own, frozen with `exec` its own: RegExp.prototype is only
// watched, and RegExp.prototype.test looks `exec` up on the object (guard.js explains why).
const reExec = RegExp.prototype.exec;
function pinned(re) {
  Reflect.defineProperty(re, 'exec', { value: reExec });
  return Object.freeze(re);
}

module.exports = { lockRealm, lockMembers, pinned };

// Locking a realm's intrinsics, so that code loaded later cannot change what the test framework
// relies on (Object.is, Array.prototype.push, Promise.prototype.then, ...).
//
// A locked property is non-writable and non-configurable. Assigning a locked name on an object that
// merely inherits it (`MyError.prototype.name = 'MyError'`) would then fail too: SES calls this the
// "override mistake". For the names ordinary code assigns that way, the locked property becomes a
// getter/setter pair whose setter defines an own property on the assigning object and refuses only
// the shared object itself. Refusals are reported through `onTamper` as well as thrown.
//
// What stays as stock JavaScript has it, because tests legitimately replace it: Date and its
// prototype (jest.spyOn(Date, 'now'), fake timers), Math (spyOn(Math, 'random')), console, process,
// Intl, timers, the global object's own properties, and every non-intrinsic object. Only the few
// Math and Date members that matchers compute with are locked (see SPYABLE_EXCEPT).
'use strict';

const CONSTRUCTORS = ['Object', 'Function', 'Array', 'String', 'Number', 'Boolean', 'Symbol', 'BigInt',
  'Error', 'EvalError', 'RangeError', 'ReferenceError', 'SyntaxError', 'TypeError', 'URIError',
  'AggregateError', 'Promise', 'RegExp', 'Map', 'Set', 'WeakMap', 'WeakSet', 'WeakRef',
  'FinalizationRegistry', 'ArrayBuffer', 'SharedArrayBuffer', 'DataView', 'Int8Array', 'Uint8Array',
  'Uint8ClampedArray', 'Int16Array', 'Uint16Array', 'Int32Array', 'Uint32Array', 'Float32Array',
  'Float64Array', 'BigInt64Array', 'BigUint64Array'];
const NAMESPACES = ['Reflect', 'JSON', 'Atomics'];
// Statics that Node and Jest assign at run time (stack depth, source maps) stay writable.
const STATICS_LEFT = { Error: new Set(['stackTraceLimit', 'prepareStackTrace', 'captureStackTrace']) };
// Spyable objects of which only these members are locked: what matchers compute with.
const SPYABLE_EXCEPT = {
  Math: ['abs', 'pow', 'max', 'min', 'floor'],
  'Date.prototype': ['valueOf', 'getTime', 'toISOString', Symbol.toPrimitive],
};
// Prototypes on which ordinary code assigns inherited names; elsewhere a locked object is frozen.
const TAMED_ON = new Set(['Object.prototype', 'Function.prototype', 'Error.prototype', 'EvalError.prototype',
  'RangeError.prototype', 'ReferenceError.prototype', 'SyntaxError.prototype', 'TypeError.prototype',
  'URIError.prototype', 'AggregateError.prototype']);
const TAMED = new Set(['constructor', 'toString', 'valueOf', 'toLocaleString', 'toJSON', 'name', 'message']);

function hidden(g) {
  // Intrinsics without a global name, reached through values made in realm `g`.
  const gp = Object.getPrototypeOf;
  const [gen, agen, afn] = g.Function('return [function* () {}, async function* () {}, async function () {}]')();
  const arrayIter = gp(new g.Array()[g.Symbol.iterator]());
  return [
    gp(gen), gp(gen).prototype, gp(agen), gp(agen).prototype, gp(afn),
    arrayIter, gp(arrayIter), gp(gp(gp(agen).prototype)),
    gp(new g.Map()[g.Symbol.iterator]()), gp(new g.Set()[g.Symbol.iterator]()),
    gp(''[g.Symbol.iterator].call('')), gp(/x/g[g.Symbol.matchAll]('')),
    gp(g.Int8Array), gp(g.Int8Array.prototype),
  ];
}

function lockProperty(obj, key, onTamper, label) {
  const d = Reflect.getOwnPropertyDescriptor(obj, key);
  if (!d || !d.configurable) return;
  if ('value' in d && TAMED.has(key)) {
    const value = d.value;
    Reflect.defineProperty(obj, key, {
      configurable: false, enumerable: d.enumerable,
      get() { return value; },
      set(v) {
        if (this === obj) {
          onTamper(`assigned ${label}.${String(key)}`);
          throw new TypeError(`Cannot assign to read only property '${String(key)}' of ${label}`);
        }
        Reflect.defineProperty(this, key, { value: v, writable: true, enumerable: true, configurable: true });
      },
    });
  } else if ('value' in d) {
    Reflect.defineProperty(obj, key, { value: d.value, writable: false, enumerable: d.enumerable, configurable: false });
  } else {
    Reflect.defineProperty(obj, key, { get: d.get, set: d.set, enumerable: d.enumerable, configurable: false });
  }
}

function lockAll(obj, onTamper, label, skip) {
  if (!skip && !TAMED_ON.has(label)) {
    Object.freeze(obj);  // one call; what follows is the per-property path
    return;
  }
  for (const key of Reflect.ownKeys(obj)) {
    if (skip && skip.has(key)) continue;
    lockProperty(obj, key, onTamper, label);
  }
}

// Lock the intrinsics of the realm whose global object is `g`. Returns [object, key, value] triples
// of what was locked (for identity checks).
function lockRealm(g, { onTamper = () => {} } = {}) {
  for (const name of CONSTRUCTORS) {
    const C = g[name];
    if (typeof C !== 'function') continue;
    lockAll(C, onTamper, name, STATICS_LEFT[name]);
    if (C.prototype) lockAll(C.prototype, onTamper, `${name}.prototype`);
  }
  for (const name of NAMESPACES) if (g[name]) lockAll(g[name], onTamper, name);
  for (const obj of hidden(g)) lockAll(obj, onTamper, 'intrinsic');
  for (const key of SPYABLE_EXCEPT.Math) lockProperty(g.Math, key, onTamper, 'Math');
  for (const key of SPYABLE_EXCEPT['Date.prototype']) lockProperty(g.Date.prototype, key, onTamper, 'Date.prototype');
  // Pollution of Object.prototype or Function.prototype with new names changes every optional-field
  // read in the framework (`if (options.failing)`), so those two take no new properties.
  Object.preventExtensions(g.Object.prototype);
  Object.preventExtensions(g.Function.prototype);
}

module.exports = { lockRealm };

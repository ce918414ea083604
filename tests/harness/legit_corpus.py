"""A project whose tests do what ordinary Jest tests do, and that the guard must leave alone.

Spies on Date, Math, console, fs and plain objects; fake timers (modern and legacy); module mocks
(factory, manual __mocks__, automock); expect.extend in a test file and in a setup file; custom
equality testers; snapshots on disk and inline; each; async, done callbacks, resolves/rejects;
expect.assertions; node's assert; isolateModules and requireActual; process.env; source code that
assigns inherited names (Error subclasses, toString, constructor, ES5 subclasses of TypeError and
RangeError, and exports named as Object.prototype's methods, as Babel compiles `export function
hasOwnProperty`); ES5-style subclasses of Map and Set that assign `constructor` and `toString` on
their prototype; a class with a static `Symbol.hasInstance` (a brand check); a library that probes
`process.binding` and falls back (chai 4); empty test and describe titles.
"""

from __future__ import annotations

import json

SNAP = (
    "// Jest Snapshot v1, https://goo.gl/fbAQLP\n\n"
    'exports[`snapshots on disk 1`] = `\n{\n  "when": 1700000000000,\n  "who": "ada",\n}\n`;\n'
)

# ES5-style subclasses of Map and Set (Object.create and TypeScript's __extends onto a Map heir).
COLLECTIONS = (
    "function Registry() { var m = new Map(); Object.setPrototypeOf(m, Registry.prototype); return m; }\n"
    "Registry.prototype = Object.create(Map.prototype);\nRegistry.prototype.constructor = Registry;\n"
    "Registry.prototype.names = function () { return Array.from(this.keys()).sort(); };\n"
    "function TagSet(xs) { var s = new Set(xs); Object.setPrototypeOf(s, TagSet.prototype); return s; }\n"
    "TagSet.prototype = Object.create(Set.prototype);\nTagSet.prototype.constructor = TagSet;\n"
    "TagSet.prototype.toString = function () { return Array.from(this).join(','); };\n"
    "function __extends(d, b) { function __() { this.constructor = d; } __.prototype = b.prototype; d.prototype = new __(); }\n"
    "function Cache() { var m = new Map(); Object.setPrototypeOf(m, Cache.prototype); return m; }\n"
    "__extends(Cache, Map);\nCache.prototype.valueOf = function () { return this.size; };\n"
    "module.exports = { Registry, TagSet, Cache };\n"
)
BUILTINS_SUBCLASS_TESTS = (
    "const { Registry, TagSet, Cache } = require('../src/collections');\n"
    "test('ES5 subclasses of Map and Set', () => {\n  const r = new Registry();\n  r.set('b', 2).set('a', 1);\n"
    "  expect(r).toBeInstanceOf(Map);\n  expect(r.constructor).toBe(Registry);\n  expect(r.names()).toEqual(['a', 'b']);\n"
    "  expect(String(new TagSet(['x', 'y']))).toBe('x,y');\n  expect(new TagSet(['x']).constructor).toBe(TagSet);\n"
    "  const c = new Cache();\n  c.set(1, 1);\n  expect(c.constructor).toBe(Cache);\n  expect(+c).toBe(1);\n"
    "  expect(new Map().constructor).toBe(Map);\n  expect(new Set([1])).toEqual(new Set([1]));\n});\n"
)
# A brand check: an object revived from JSON counts as a Money without being made by its constructor.
BRAND = (
    "const BRAND = Symbol.for('corpus.money');\n"
    "class Money {\n  constructor(cents) { this.cents = cents; this[BRAND] = true; }\n"
    "  static [Symbol.hasInstance](v) { return v != null && v[BRAND] === true; }\n}\n"
    "class Refused extends Error {\n  static [Symbol.hasInstance](v) { return v instanceof Error && v.code === 'REFUSED'; }\n}\n"
    "const revive = (o) => ({ cents: o.cents, [BRAND]: true });\n"
    "const refuse = () => { const e = new Error('no'); e.code = 'REFUSED'; throw e; };\n"
    "module.exports = { Money, Refused, revive, refuse };\n"
)
HAS_INSTANCE_TESTS = (
    "const { Money, Refused, revive, refuse } = require('../src/brand');\n"
    "test('a class with a static Symbol.hasInstance', () => {\n"
    "  expect(revive({ cents: 5 })).toBeInstanceOf(Money);\n  expect({ cents: 5 }).not.toBeInstanceOf(Money);\n"
    "  expect({ m: revive({ cents: 1 }) }).toEqual({ m: expect.any(Money) });\n"
    "  expect(refuse).toThrow(Refused);\n  expect(new Money(2) instanceof Money).toBe(true);\n});\n"
)

FILES = {
    "package.json": None,  # written by the test helper, with the jest config below
    "jest.setup.js": "expect.extend({ toBeEven: (n) => ({ pass: n % 2 === 0, message: () => `${n} is odd` }) });\n",
    "src/clock.js": "exports.stamp = (who) => ({ who, when: Date.now() });\n"
    "exports.later = (fn) => setTimeout(fn, 1000);\n"
    "exports.roll = () => Math.floor(Math.random() * 6) + 1;\n",
    "src/errors.js": "class NotFound extends Error {}\nNotFound.prototype.name = 'NotFound';\n"
    "function Money(c) { this.cents = c; }\n"
    "Money.prototype.toString = function () { return `$${(this.cents / 100).toFixed(2)}`; };\n"
    "Money.prototype.constructor = Money;\n"
    "module.exports = { NotFound, Money, find: (id) => { if (id !== 1) throw new NotFound(`no ${id}`); return { id }; } };\n",
    "src/util.js": "function hasOwnProperty(o, k) { return Object.prototype.hasOwnProperty.call(o, k); }\n"
    "exports.hasOwnProperty = hasOwnProperty;\nexports.isPrototypeOf = (a, b) => Object.prototype.isPrototypeOf.call(a, b);\n",
    # ES5 subclassing as TypeScript's __extends and Babel's loose classes compile it (bson, #16).
    "src/legacy.js": "function __extends(d, b) { function __() { this.constructor = d; }\n"
    "  __.prototype = b.prototype; d.prototype = new __(); }\n"
    "function BadInput(msg) { var e = TypeError.call(this, msg); this.message = e.message; }\n"
    "__extends(BadInput, TypeError);\nBadInput.prototype.name = 'BadInput';\n"
    "BadInput.prototype.toString = function () { return 'BadInput!'; };\n"
    "function OutOfRange() {}\nOutOfRange.prototype = Object.create(RangeError.prototype);\n"
    "OutOfRange.prototype.constructor = OutOfRange;\nOutOfRange.prototype.message = 'out of range';\n"
    "module.exports = { BadInput, OutOfRange };\n",
    # A feature probe as chai 4's loupe makes when it loads (#16: radash's tests).
    "src/probe.js": "let details = null;\n"
    "try { details = process.binding('util').getPromiseDetails; } catch (notNode) { /* ignore */ }\n"
    "exports.describe = (p) => (details ? 'Promise{native}' : 'Promise{…}');\n",
    "src/collections.js": COLLECTIONS,
    "src/brand.js": BRAND,
    "tests/builtins.test.js": BUILTINS_SUBCLASS_TESTS,
    "tests/brand.test.js": HAS_INSTANCE_TESTS,
    "src/files.js": "const fs = require('fs');\nexports.size = (p) => fs.readFileSync(p, 'utf8').length;\n",
    "src/api.js": "exports.fetchUser = async (id) => ({ id, real: true });\n",
    "src/__mocks__/api.js": "exports.fetchUser = async (id) => ({ id, mocked: true });\n",
    "src/math.js": "exports.add = (a, b) => a + b;\nexports.mul = (a, b) => a * b;\n",
    "src/service.js": "const math = require('./math');\n"
    "exports.total = (xs) => xs.reduce((a, b) => math.add(a, b), 0);\n"
    "exports.notify = (log, msg) => { log.error(msg); return msg.length; };\n"
    "exports.fetchLater = (cb) => setTimeout(() => cb(null, 42), 10);\n",
    "tests/spies.test.js": (
        "const clock = require('../src/clock');\nconst service = require('../src/service');\n"
        "test('Date.now and Math.random spies', () => {\n"
        "  jest.spyOn(Date, 'now').mockReturnValue(1700000000000);\n"
        "  jest.spyOn(Math, 'random').mockReturnValue(0.5);\n"
        "  expect(clock.stamp('ada')).toEqual({ who: 'ada', when: 1700000000000 });\n"
        "  expect(clock.roll()).toBe(4);\n  jest.restoreAllMocks();\n});\n"
        "test('console and object spies', () => {\n"
        "  const err = jest.spyOn(console, 'error').mockImplementation(() => {});\n"
        "  const log = { error: jest.fn() };\n"
        "  expect(service.notify(log, 'boom')).toBe(4);\n"
        "  expect(log.error).toHaveBeenCalledWith(expect.stringContaining('bo'));\n"
        "  console.error('x');\n  expect(err).toHaveBeenCalledTimes(1);\n  err.mockRestore();\n});\n"
        "test('fs spy reaches the source module', () => {\n"
        "  jest.spyOn(require('fs'), 'readFileSync').mockReturnValue('12345');\n"
        "  expect(require('../src/files').size('/nowhere')).toBe(5);\n  jest.restoreAllMocks();\n});\n"
        "test('snapshots on disk', () => {\n"
        "  jest.spyOn(Date, 'now').mockReturnValue(1700000000000);\n"
        "  expect(clock.stamp('ada')).toMatchSnapshot();\n});\n"
        "test('inline snapshot', () => expect([1, 'a']).toMatchInlineSnapshot(`\n[\n  1,\n  \"a\",\n]\n`));\n"
    ),
    "tests/__snapshots__/spies.test.js.snap": SNAP,
    "tests/timers.test.js": (
        "const clock = require('../src/clock');\n"
        "test('modern fake timers', () => {\n  jest.useFakeTimers();\n  const f = jest.fn();\n"
        "  clock.later(f);\n  jest.advanceTimersByTime(1000);\n  expect(f).toHaveBeenCalled();\n"
        "  jest.setSystemTime(new Date('2024-01-02T00:00:00Z'));\n"
        "  expect(new Date().toISOString()).toBe('2024-01-02T00:00:00.000Z');\n  jest.useRealTimers();\n});\n"
        "test('legacy fake timers', () => {\n  jest.useFakeTimers({ legacyFakeTimers: true });\n"
        "  const f = jest.fn();\n  clock.later(f);\n  jest.runAllTimers();\n  expect(f).toHaveBeenCalledTimes(1);\n"
        "  jest.useRealTimers();\n});\n"
        "test('done callback', (done) => {\n"
        "  require('../src/service').fetchLater((err, v) => { expect(v).toBe(42); done(err); });\n});\n"
    ),
    "tests/mocks.test.js": (
        "jest.mock('../src/api');\njest.mock('../src/math', () => ({ ...jest.requireActual('../src/math'), "
        "add: jest.fn((a, b) => a + b) }));\n"
        "const api = require('../src/api');\nconst math = require('../src/math');\n"
        "const service = require('../src/service');\n"
        "test('manual mock', async () => { await expect(api.fetchUser(3)).resolves.toEqual({ id: 3, mocked: true }); });\n"
        "test('factory mock with requireActual', () => {\n  expect(service.total([1, 2, 3])).toBe(6);\n"
        "  expect(math.add).toHaveBeenCalledTimes(3);\n  expect(math.mul(2, 3)).toBe(6);\n});\n"
        "test('automock and isolateModules', () => {\n  jest.isolateModules(() => {\n"
        "    jest.doMock('../src/clock');\n    const clock = require('../src/clock');\n"
        "    expect(jest.isMockFunction(clock.stamp)).toBe(true);\n  });\n});\n"
    ),
    "tests/matchers.test.js": (
        "const assert = require('node:assert');\nconst { NotFound, Money, find } = require('../src/errors');\n"
        "expect.extend({ toBeMoney(m, cents) { const pass = m instanceof Money && m.cents === cents;\n"
        "  return { pass, message: () => `expected ${m} to be ${cents}` }; } });\n"
        "expect.addEqualityTesters([(a, b) => (a instanceof Money && b instanceof Money ? a.cents === b.cents : undefined)]);\n"
        "test('extend in test file and setup file', () => {\n  expect(new Money(250)).toBeMoney(250);\n"
        "  expect(4).toBeEven();\n  expect({ m: new Money(1) }).toEqual({ m: expect.toBeMoney(1) });\n});\n"
        "test('custom equality tester', () => expect(new Money(5)).toEqual(new Money(5)));\n"
        "test('errors and inherited names', () => {\n  expect(() => find(2)).toThrow(NotFound);\n"
        "  expect(() => find(2)).toThrow('no 2');\n  expect(String(new Money(1999))).toBe('$19.99');\n"
        "  expect(new NotFound('x').name).toBe('NotFound');\n});\n"
        "test('ES5 subclasses of the error types', () => {\n  const { BadInput, OutOfRange } = require('../src/legacy');\n"
        "  const e = new BadInput('bad');\n  expect(e).toBeInstanceOf(TypeError);\n  expect(e.name).toBe('BadInput');\n"
        "  expect(String(e)).toBe('BadInput!');\n  expect(new OutOfRange().constructor).toBe(OutOfRange);\n"
        "  expect(new OutOfRange().message).toBe('out of range');\n});\n"
        "test('exports named as Object.prototype methods', () => {\n  const util = require('../src/util');\n"
        "  expect(util.hasOwnProperty({ a: 1 }, 'a')).toBe(true);\n  expect(util.hasOwnProperty({}, 'a')).toBe(false);\n"
        "  expect(util.isPrototypeOf(Object.prototype, {})).toBe(true);\n});\n"
        "test('async rejects and assertions count', async () => {\n  expect.assertions(2);\n"
        "  await expect(Promise.reject(new NotFound('gone'))).rejects.toThrow(NotFound);\n"
        "  await expect(Promise.resolve(1)).resolves.toBe(1);\n});\n"
        "test('node assert', () => { assert.strictEqual(find(1).id, 1); assert.deepStrictEqual(find(1), { id: 1 }); });\n"
        "test.each([[1, 1, 2], [2, 3, 5]])('each %i + %i', (a, b, c) => expect(a + b).toBe(c));\n"
        "describe.each(['x', 'y'])('describe.each %s', (s) => { test('has length 1', () => expect(s).toHaveLength(1)); });\n"
        "test('asymmetric matchers in expectations', () => {\n  const f = jest.fn();\n  f({ id: 1, at: 5 });\n"
        "  expect(f).toHaveBeenCalledWith(expect.objectContaining({ id: 1 }));\n"
        "  expect({ a: 1, b: 'x' }).toEqual({ a: expect.any(Number), b: expect.anything() });\n"
        "  expect([3, 1]).toEqual(expect.arrayContaining([1]));\n});\n"
        "test('a library that probes process.binding and falls back', () => {\n"
        "  expect(require('../src/probe').describe(Promise.resolve())).toMatch(/^Promise\\{/);\n});\n"
        "test('process.env', () => { process.env.MODE = 'test-mode'; expect(process.env.MODE).toBe('test-mode'); });\n"
    ),
    # Empty titles, which Jest leaves out of a test's fullName at the end and keeps in the middle.
    "tests/titles.test.js": (
        "describe('titles', () => {\n  test('', () => expect(1).toBe(1));\n"
        "  describe('', () => { test('inner', () => expect(2).toBe(2)); });\n});\n"
        "describe('', () => { test('', () => expect(3).toBe(3)); });\n"
    ),
}
CONFIG = {"setupFilesAfterEnv": ["<rootDir>/jest.setup.js"]}
N_TESTS = 30  # every one passes, under stock Jest and under the guard


def stock(sb) -> list[tuple[str, str, str]]:
    """What stock Jest reports for the project in sandbox ``sb``: (file, full name, status) of each
    test, sorted."""
    out = sb.exec(
        ["node", "/opt/etai/node_modules/jest/bin/jest.js", "--ci", "--json", "--silent"],
        timeout=60,
    )
    report = json.loads(out.stdout)
    return sorted(
        (r["name"].removeprefix("/scratch/ws/"), t["fullName"], t["status"])
        for r in report["testResults"]
        for t in r["assertionResults"]
    )


def graded(sb):
    """A guarded run of every test in sandbox ``sb``, as the harness reads it (a JestResult)."""
    from harness.grading.jest import from_runner

    answer = sb.request(
        "jest", {"timeout_ms": 60000, "output_cap": sb.limits.output_cap}, timeout=60
    )
    return from_runner(answer)

// The template project a new Jest host warms on (jest-host.js `warm`). A host's first run costs
// several times a later one: V8 compiles Jest, babel-jest, the framework and the guard for the first
// test file (a cold run 1.4 s against 0.15 s warm, bench/suite_throughput.py). The runner writes
// these files where the sandbox user cannot write (runner.js WARM_DIR) and asks each new host for
// one run of them before it serves anything: trusted code only, outside the workspace; what stays
// is V8's compiled code. The template touches what most test files do: require, describe, sync and
// async tests, the common matchers, a mock, a thrown error.
'use strict';

const fs = require('fs');
const path = require('path');

const files = {
  'package.json': JSON.stringify({ name: 'etai-warm', private: true, jest: { testEnvironment: 'node' } }),
  'src/calc.js': "'use strict';\nexports.add = (a, b) => a + b;\nexports.later = (v) => Promise.resolve(v);\n"
    + "exports.check = (x) => { if (x < 0) throw new RangeError('negative'); return [x, { x }]; };\n",
  'tests/calc.test.js': "const c = require('../src/calc');\ndescribe('calc', () => {\n"
    + "  test('add', () => { expect(c.add(1, 2)).toBe(3); expect(c.add(0.1, 0.2)).toBeCloseTo(0.3); });\n"
    + "  test('later', async () => { await expect(c.later(2)).resolves.toBe(2); });\n"
    + "  test('check', () => { expect(c.check(1)).toEqual([1, { x: 1 }]); expect(() => c.check(-1)).toThrow(RangeError); });\n"
    + "  test('mock', () => { const f = jest.fn(); f(1); expect(f).toHaveBeenCalledWith(1); expect({ a: 1, b: 2 }).toMatchObject({ a: 1 }); });\n"
    + "});\n",
};

// Written by the runner where no test can write (root-owned, read-only to the sandbox user), by the
// image build and by bench/host_start.py.
function writeTo(dir) {
  for (const [name, text] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(dir, name)), { recursive: true, mode: 0o755 });
    fs.writeFileSync(path.join(dir, name), text, { mode: 0o644 });
  }
}

module.exports = { files, writeTo };


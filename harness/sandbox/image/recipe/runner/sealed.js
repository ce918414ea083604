// Sealed test files: held-out tests that no process of the sandbox user can read (docs/grading.md#sealed-held-out-tests).
//
// The runner writes a held-out test file root's alone (mode 0600, runner.js `sealed`): the code
// under test, and every command it starts, runs as the sandbox user and gets EACCES, so it cannot
// read the expected values out of the file while the held-out run is under way. This host runs as
// that user too: Jest's own reads of a test file (`install`) take a sealed file's text from the
// graded request instead (`serve`). Nothing else is answered from it: Jest's
// `jest-native-read-file`, which every test context holds, reads the disk as the sandbox user and
// gets EACCES like any other read.
'use strict';

const path = require('path');
const { amend, jestModule } = require('./jest-warm');

const served = new Map(); // absolute path -> text, for this host's one graded run

// The sealed files of a graded request ({ path: base64 }), before any of the run's code is loaded.
function serve(files) {
  for (const [p, b64] of Object.entries(files || {})) served.set(path.resolve(p), Buffer.from(String(b64), 'base64').toString('utf8'));
}

// runTest's read: a sealed file's text, or what the disk holds.
function read(file, disk) {
  const text = served.get(path.resolve(file));
  return text === undefined ? disk() : text;
}

// Whether this host was handed the file's text as sealed.
function isSealed(file) {
  return served.has(path.resolve(file));
}

// Jest reads a test file in two places, both made to take a sealed file's text from `served`:
// jest-runner's runTest.js (for the file's docblock; the line keeps its number, so stack frames
// read as in stock Jest) and the runtime's `readFileBuffer`, under which every module read goes.
function install(jestDir) {
  const to = `const testSource = require(${JSON.stringify(__filename)}).read(path, () => fs().readFileSync(path, 'utf8'));`;
  amend(jestDir, 'jest-runner', path.join('build', 'runTest.js'),
    [["const testSource = fs().readFileSync(path, 'utf8');", to]], 'etai sealed');
  const { prototype } = jestModule(jestDir, 'jest-runtime', 'build/index.js').default;
  const disk = prototype.readFileBuffer;
  if (typeof disk !== 'function') throw new Error('etai sealed: jest-runtime has no readFileBuffer; re-check sealed.js');
  prototype.readFileBuffer = function readFileBuffer(filename) {
    const text = served.get(path.resolve(filename));
    return text === undefined ? Reflect.apply(disk, this, [filename]) : Buffer.from(text, 'utf8');
  };
}

module.exports = { install, serve, read, isSealed };

// Sealed test files: held-out tests that no process of the sandbox user can read (docs/grading.md#sealed-held-out-tests).
//
// The runner writes a held-out test file root's alone (mode 0600, runner.js `sealed`): the code
// under test, and every command it starts, runs as the sandbox user and gets EACCES, so it cannot
// read the expected values out of the file while the held-out run is under way. This host runs as
// that user too: the reads of this realm (`install`) take a sealed file's text from the graded
// request instead (`serve`). A test context's reads do not: its `fs` is the guard's copy, made
// with the disk's readFileSync (`disk`), and Jest's `jest-native-read-file`, which every context
// holds, is graceful-fs's, loaded before the patch; both get EACCES like any other read.
'use strict';

const path = require('path');
const { amend, jestModule } = require('./jest-warm');

const served = new Map(); // absolute path -> text, for this host's one graded run
const fs = require('fs');
const disk = { readFileSync: fs.readFileSync }; // what a test context's fs gets (guard.js)
// A sealed text becomes bytes only through these, pinned now: Buffer is this realm's object, which
// every test context holds.
const { from: bufferFrom } = Buffer;
const { toString: bufferToString } = Buffer.prototype;
const bytes = (text) => Reflect.apply(bufferFrom, Buffer, [text, 'utf8']);

// The sealed files of a graded request ({ path: base64 }), before any of the run's code is loaded.
function serve(files) {
  for (const [p, b64] of Object.entries(files || {})) {
    served.set(path.resolve(p), Reflect.apply(bufferToString, Reflect.apply(bufferFrom, Buffer, [String(b64), 'base64']), ['utf8']));
  }
}

// A sealed file's text, or undefined. Every read of this realm asks (Node's loader too): a host
// that was handed none answers without resolving the path.
function sealedText(file) {
  return served.size && typeof file === 'string' ? served.get(path.resolve(file)) : undefined;
}

// runTest's read: a sealed file's text, or what the disk holds.
function read(file, fromDisk) {
  const text = sealedText(file);
  return text === undefined ? fromDisk() : text;
}

// Whether this host was handed the file's text as sealed.
function isSealed(file) {
  return sealedText(file) !== undefined;
}

// This realm's reads of a sealed file, answered from `served`: jest-runner's runTest.js (the file's
// docblock; the line keeps its number, so stack frames read as in stock Jest), the runtime's
// `readFileBuffer`, under which every module read goes, and Node's `fs.readFileSync`, with which a
// transformer reads what it compiles against (ts-jest's TypeScript reads the file to type-check
// it). graceful-fs, whose copy of readFileSync Jest hands every test context as
// `jest-native-read-file`, is loaded first, so that copy is the disk's.
function install(jestDir) {
  require(require.resolve('graceful-fs', { paths: [jestDir] }));
  fs.readFileSync = function readFileSync(file, options) {
    const text = sealedText(file);
    if (text === undefined) return Reflect.apply(disk.readFileSync, this, arguments);
    const encoding = typeof options === 'string' ? options : options && options.encoding;
    return encoding ? Reflect.apply(bufferToString, bytes(text), [encoding]) : bytes(text);
  };
  const to = `const testSource = require(${JSON.stringify(__filename)}).read(path, () => fs().readFileSync(path, 'utf8'));`;
  // Source-map support formats a stack thrown in a test by reading each file in it: a sealed one
  // reads as a file without a map, so that its text never passes through the objects a test holds.
  const stack = `environment: 'node', retrieveFile: require(${JSON.stringify(__filename)}).stackRead,`;
  amend(jestDir, 'jest-runner', path.join('build', 'runTest.js'),
    [["const testSource = fs().readFileSync(path, 'utf8');", to], ["    environment: 'node',", `    ${stack}`]], 'etai sealed');
  const { prototype } = jestModule(jestDir, 'jest-runtime', 'build/index.js').default;
  const bufferFromDisk = prototype.readFileBuffer;
  if (typeof bufferFromDisk !== 'function') throw new Error('etai sealed: jest-runtime has no readFileBuffer; re-check sealed.js');
  prototype.readFileBuffer = function readFileBuffer(filename) {
    const text = sealedText(filename);
    return text === undefined ? Reflect.apply(bufferFromDisk, this, [filename]) : bytes(text);
  };
}

// source-map-support's file reader: a stand-in text for a sealed file (a handler's empty answer
// would fall through to its own reader), nothing for the others.
function stackRead(file) {
  return typeof file === 'string' && isSealed(file.trim().replace(/^file:\/\//, '')) ? '/* sealed */' : null;
}

module.exports = { install, serve, read, isSealed, disk, stackRead };

// Makes the V8 code cache (code-cache.js) while the image is built: for each heap limit given, a
// Jest host started with that limit (V8 keeps code only for the flags it was made under) runs the
// template project (warm-template.js) once and writes the code it compiled; then one with the flags
// of runner.js's zygote, which adds code-cache.js's ZYGOTE_FLAGS (hosts forked from it run its code).
// Run as root by the Dockerfile, before any workspace exists; nothing else runs it. A host that
// fails fails the build.
//   node code-cache-build.js HEAP_MB...
'use strict';

const cp = require('child_process');
const fs = require('fs');
const path = require('path');
const { ZYGOTE_FLAGS } = require('./code-cache');

function once(execArgv) {
  const tmp = fs.mkdtempSync('/tmp/etai-code-cache-'); // the image's TMPDIR is made at run time
  const ws = path.join(tmp, 'ws');
  const warmDir = path.join(tmp, 'warm');
  require('./warm-template').writeTo(warmDir);
  fs.mkdirSync(ws);
  const env = Object.assign({}, process.env, { ETAI_CODE_CACHE_WRITE: '1', ETAI_WORKSPACE: ws, TMPDIR: tmp });
  const host = cp.fork(path.join(__dirname, 'jest-host.js'), [], {
    cwd: ws, execArgv, stdio: ['ignore', 'inherit', 'inherit', 'ipc'], env,
  });
  return new Promise((resolve, reject) => {
    host.on('exit', (code) => reject(new Error(`code-cache-build: the host for ${execArgv.join(' ')} exited (${code})`)));
    host.on('message', (raw) => {
      const answer = JSON.parse(raw.json);
      host.removeAllListeners('exit');
      host.kill('SIGKILL');
      fs.rmSync(tmp, { recursive: true, force: true });
      const made = answer.code_cache;
      if (!(answer.warmed > 0) || !made || !(made.entries > 0)) {
        reject(new Error(`code-cache-build: no code for ${execArgv.join(' ')}: ${raw.json.slice(0, 2000)}`));
      } else resolve(made);
    });
    host.send({ op: 'warm', nonce: 'build', dir: warmDir });
  });
}

(async () => {
  if (!process.env.ETAI_CODE_CACHE || process.argv.length < 3) throw new Error('usage: ETAI_CODE_CACHE=DIR node code-cache-build.js HEAP_MB...');
  for (const heap of process.argv.slice(2)) {
    for (const extra of [[], ZYGOTE_FLAGS]) {
      const made = await once([`--max-old-space-size=${Number(heap)}`, ...extra]);
      process.stdout.write(`code cache: ${made.entries} scripts, ${made.bytes} bytes in ${made.folder}\n`);
    }
  }
})().catch((e) => { process.stderr.write(`${e.stack || e}\n`); process.exit(1); });

// ETAI in-sandbox runner: the trusted half of the sandbox.
//
// The harness keeps one long-lived pipe to this process (a `docker exec -i`, or a plain subprocess
// for the `local` sandbox) and speaks JSON lines: one request object per stdin line, one answer per
// stdout line, answers in request order. A persistent pipe instead of a `docker exec` per step is
// what brings a Jest step from ~650 ms to ~120 ms (docs/sandbox.md#warm-jest-hosts).
//
// Untrusted code (the workspace's tests, an agent's commands) never runs in this process: Jest runs
// in a warm child (jest-host.js) in its own process group, commands run in their own process groups,
// and this process enforces their deadlines and output caps by killing the whole group. The harness
// enforces a second, outer deadline by killing the container.
'use strict';

const fs = require('fs');
const path = require('path');
const cp = require('child_process');
const crypto = require('crypto');
const { EventEmitter } = require('events');
const fileSig = require('./file-sig');
const { ZYGOTE_FLAGS } = require('./code-cache');

const WS = path.resolve(process.env.ETAI_WORKSPACE || '/scratch/ws');
const HOST = path.join(__dirname, 'jest-host.js');
// In the Docker sandbox (which sets ETAI_SANDBOX_UID) this runner is root, with only SETUID, SETGID
// and KILL, and owns the workspace; tests and commands run as the sandbox user, to whom the
// workspace is read-only. The `local` sandbox runs everything as the calling user.
const SANDBOX_ID = Number(process.env.ETAI_SANDBOX_UID || 0);
const AS_ROOT = SANDBOX_ID > 0 && process.getuid && process.getuid() === 0;
const TMP = process.env.TMPDIR || '/tmp';
const SCRATCH = path.dirname(WS);
// Jest hosts' HOME: a folder this runner makes and the sandbox user cannot write. Node builds its
// global module folders from HOME at start-up ($HOME/.node_modules, $HOME/.node_libraries), and Jest's
// own code falls through to them for a module found nowhere else: they must hold nothing a test or
// command could have put there (README "What grading resists", the host realm's loads).
const HOST_HOME = AS_ROOT ? path.join(SCRATCH, 'home') : process.env.HOME;
// The template project a new host warms on (warm-template.js), written by this runner where the
// sandbox user cannot write it: a host warms while workspace code may run in another process.
const WARM_DIR = AS_ROOT ? path.join(SCRATCH, 'warm') : path.join(TMP, `etai-warm-${process.pid}`);
// Where every host writes what it transformed (transform-cache.js); the harness copies it out of a
// preflight's sandbox only, into the store that later sandboxes read (ETAI_TRANSFORM_STORE). The
// `local` sandbox has no store.
const TRANSFORM_OUT = AS_ROOT ? path.join(SCRATCH, 'transforms') : '';
const MAX_READ = 1 << 20; // file_read answers at most 1 MiB; the rest is reported as truncated
const protocolOut = process.stdout; // only this process writes protocol lines here

// ---------------------------------------------------------------- paths
class ToolError extends Error {}

function inside(p) {
  return p === WS || p.startsWith(WS + path.sep);
}

// Resolve a workspace-relative path and refuse anything that leaves the workspace, including
// through symlinks (checked on the real path of the longest existing prefix). Writes never reach
// .git (its config can name commands that git runs) or node_modules (what tests require).
function resolvePath(rel, { mustExist = true, write = false } = {}) {
  if (typeof rel !== 'string' || rel === '') throw new ToolError('path must be a non-empty string');
  if (rel.includes('\0')) throw new ToolError('path contains a NUL byte');
  const p = path.resolve(WS, rel);
  if (!inside(p)) throw new ToolError(`path ${JSON.stringify(rel)} leaves the workspace`);
  const parts = path.relative(WS, p).split(path.sep);
  if (write && (parts.includes('.git') || parts.includes('node_modules'))) {
    throw new ToolError(`path ${JSON.stringify(rel)} is inside ${parts.includes('.git') ? '.git' : 'node_modules'}, which tools may not change`);
  }
  let probe = p;
  while (!fs.existsSync(probe) && probe !== WS) probe = path.dirname(probe);
  let real;
  try { real = fs.realpathSync(probe); } catch (e) { real = probe; }
  if (!inside(real)) throw new ToolError(`path ${JSON.stringify(rel)} leaves the workspace (through a symlink)`);
  if (mustExist && !fs.existsSync(p)) throw new ToolError(`no such file: ${rel}`);
  return p;
}

function rel(p) { return path.relative(WS, p) || '.'; }

// ---------------------------------------------------------------- child processes
// Run argv in its own process group with a deadline and an output cap; resolve with what happened.
function runCommand(argv, { timeoutMs = 10000, outputCap = 1 << 20, cwd = WS, input = null } = {}) {
  return new Promise((resolve) => {
    const t0 = Date.now();
    const oomBefore = oomKills();
    let child;
    try {
      child = cp.spawn(argv[0], argv.slice(1), Object.assign({ cwd, detached: true, stdio: ['pipe', 'pipe', 'pipe'] },
        AS_ROOT ? { uid: SANDBOX_ID, gid: SANDBOX_ID, env: Object.assign({}, process.env, { HOME: TMP }) } : {}));
    } catch (e) {
      resolve({ status: 'failed', exit_code: 127, stdout: '', stderr: String(e.message), duration_ms: 0 });
      return;
    }
    const out = { stdout: [], stderr: [], n: 0 };
    let reason = null;
    const killGroup = () => { try { process.kill(-child.pid, 'SIGKILL'); } catch (e) { /* gone */ } };
    const timer = setTimeout(() => { reason = reason || 'timeout'; killGroup(); }, timeoutMs);
    const take = (key) => (chunk) => {
      if (out.n >= outputCap) return;
      const room = outputCap - out.n;
      out[key].push(chunk.length > room ? chunk.subarray(0, room) : chunk);
      out.n += Math.min(chunk.length, room);
      if (out.n >= outputCap) { reason = reason || 'output_limit'; killGroup(); }
    };
    child.stdout.on('data', take('stdout'));
    child.stderr.on('data', take('stderr'));
    child.on('error', (e) => { out.stderr.push(Buffer.from(String(e.message))); });
    child.stdin.on('error', () => {});
    if (input != null) child.stdin.end(input); else child.stdin.end();
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      killGroup(); // nothing it started outlives it
      if (!reason && signal === 'SIGKILL' && oomKills() > oomBefore) reason = 'memory_limit';
      resolve({
        status: reason || (code === 0 ? 'passed' : 'failed'),
        exit_code: code == null ? 128 + (signal === 'SIGKILL' ? 9 : 15) : code,
        signal: signal || null,
        stdout: Buffer.concat(out.stdout).toString('base64'),
        stderr: Buffer.concat(out.stderr).toString('base64'),
        truncated: reason === 'output_limit',
        duration_ms: Date.now() - t0,
      });
    });
  });
}

// ---------------------------------------------------------------- Jest host (warm child)
// Warm Jest hosts. With two (and two CPUs), a run of several test files is split between them
// with Jest's own --shard, so the files run in parallel while both hosts stay loaded.
//
// Two sets. The agent's own runs (the `jest_run` tool, the listing at init, the suite builder's
// mutant runs) go to `hosts`, kept warm from one run to the next until a graded run (`jestRun`).
// A graded run (`fresh`: every verification) goes to `fresh` hosts, each of which has run nothing
// but the template when it takes the request, serves that one run and is then ended: workspace
// code that outlives a run (a timer, a socket, a promise job) dies with its host and is never in a
// process that answers a graded request. Each fresh host also gets a TMPDIR of its own, made for
// it, so nothing an earlier run of the episode left in the shared one is in its way. A replacement
// warms while the agent works.
const N_HOSTS = Math.max(1, Number(process.env.ETAI_JEST_HOSTS || 1));
const WARM_HOSTS = process.env.ETAI_WARM_HOSTS !== '0'; // the agent's hosts are kept between its runs
const hosts = new Array(N_HOSTS).fill(null); // each { proc, slot, set, clean, pending, tail, outN, cap, reason }
const fresh = new Array(N_HOSTS).fill(null);
let tmpSerial = 0; // numbers the TMPDIRs hosts get (fresh hosts, the zygote)

function oomKills() {
  // cgroup v2 then v1: the kernel's count of OOM kills in this container.
  for (const [f, key] of [['/sys/fs/cgroup/memory.events', 'oom_kill'], ['/sys/fs/cgroup/memory/memory.oom_control', 'oom_kill']]) {
    try {
      const m = fs.readFileSync(f, 'utf8').match(new RegExp(`^${key} (\\d+)`, 'm'));
      if (m) return Number(m[1]);
    } catch (e) { /* not this layout */ }
  }
  return 0;
}

function hostEnv(tmp) {
  const env = Object.assign({}, process.env, { ETAI_WORKSPACE: WS, ETAI_WARM_DIR: WARM_DIR, ETAI_TRANSFORM_OUT: TRANSFORM_OUT },
    AS_ROOT ? { HOME: HOST_HOME } : {});
  // Node adds these to its module search path at start-up: a host looks only where the image put code.
  delete env.NODE_PATH;
  delete env.NODE_OPTIONS;
  if (tmp) env.TMPDIR = tmp;
  return env;
}

function hostArgs() {
  const heapMb = Number(process.env.ETAI_JEST_HEAP_MB || 0);
  return heapMb > 0 ? [`--max-old-space-size=${heapMb}`] : [];
}

// A TMPDIR of a host's own: the sandbox user's scratch space, this host's alone. A fresh host's
// stays root's (0700, as mkdtemp makes it) while the host waits, and is opened to the sandbox user
// only when the graded run starts and none of that user's processes is left (`jestRun`): nothing
// is put in it before the run for the run to find.
function ownTmp(kind) {
  const dir = fs.mkdtempSync(path.join(SCRATCH, `tmp-${kind}-${++tmpSerial}-`));
  if (AS_ROOT && kind !== 'fresh') fs.chmodSync(dir, 0o1777);
  return dir;
}

function startHost(set, slot) {
  const tmp = set === fresh ? ownTmp('fresh') : null;
  // A host starts as this process's user and, if that is root, stays root until its first request
  // that looks at the workspace, then becomes the sandbox user itself (jest-host.js
  // `asSandboxUser`): waiting, it is out of the sandbox user's reach, and that change of
  // credentials makes it non-dumpable, which a uid given to fork() would not. The zygote never
  // serves the workspace, so it stays root; a forked host starts as it is.
  const proc = forksOn()
    ? forkedHost(tmp || process.env.TMPDIR || TMP)
    : cp.fork(HOST, [], { cwd: WS, detached: true, execArgv: hostArgs(), stdio: ['ignore', 'pipe', 'pipe', 'ipc'], env: hostEnv(tmp) });
  const h = { proc, slot, set, tmp, clean: true, ready: Promise.resolve(), pending: null, tail: [], outN: 0, cap: 1 << 20, reason: null };
  const onOut = (chunk) => {
    h.outN += chunk.length;
    h.tail.push(chunk); if (h.tail.length > 8) h.tail.shift();
    if (!h.heapOom && /heap out of memory|Allocation failed/.test(chunk.toString('latin1'))) h.heapOom = true;
    if (h.pending && h.outN > h.cap) { h.reason = h.reason || 'output_limit'; killHost(h); }
  };
  proc.stdout.on('data', onOut);
  proc.stderr.on('data', onOut);
  proc.on('message', (raw) => {
    const p = h.pending;
    // Only an answer that carries this request's nonce counts (see jest-host.js), and it comes as
    // JSON text written by the host itself, never by JSON.stringify on objects a test could reach.
    if (!p || !raw || raw.nonce !== p.nonce || typeof raw.json !== 'string') return;
    let m;
    try { m = JSON.parse(raw.json); } catch (e) { return; }
    if (m && m.nonce === p.nonce) { h.pending = null; clearTimeout(p.timer); p.resolve({ ok: true, result: m }); }
  });
  proc.on('exit', (code, signal) => {
    if (set[slot] === h) set[slot] = null;
    const p = h.pending;
    if (p) {
      h.pending = null; clearTimeout(p.timer);
      p.resolve({ ok: false, code, signal, reason: h.reason, tail: Buffer.concat(h.tail).toString('utf8').slice(-4000) });
    }
  });
  proc.on('error', () => {});
  return h;
}

// ---------------------------------------------------------------- zygote (forked hosts)
// A new host costs a start and a template warm-up (~0.4 CPU-s), and an episode that is verified
// ends two of them (its own and its graded run's). Where the image has fork.node, hosts are forked
// instead from a zygote: a host that has loaded Jest and run the template and then only forks
// (jest-host.js `forkHost`). A child is what a fresh host is when it takes its first request (it
// has run nothing of any workspace), for a fraction of the cost (docs/sandbox.md#forked-hosts).
// The zygote serves no run, so no workspace code ever runs in it, and it is kept across resets like
// any clean host. Should it fail (killed by a stray, a fork that fails), a new one starts; after
// three failures in a row this runner starts its hosts itself. On with ETAI_JEST_FORK=1, which the
// harness passes unless told otherwise (harness/sandbox/_pipe.py host_flags).
const FORK_ADDON = process.env.ETAI_JEST_FORK === '1' && fs.existsSync(path.join(__dirname, 'fork.node'));
let zygote = null; // { proc, tmp, ready: Promise<boolean>, waiting: nonce -> handler, exits: pid -> status }
let zygoteFailures = 0;
let forkTurn = Promise.resolve();

function forksOn() { return FORK_ADDON && zygoteFailures < 3; }

function startZygote() {
  const tmp = ownTmp('zygote');
  const proc = cp.fork(HOST, [], { cwd: WS, detached: true, execArgv: hostArgs().concat(ZYGOTE_FLAGS),
    stdio: ['ignore', 'ignore', 'ignore', 'ipc'], env: Object.assign(hostEnv(tmp), { ETAI_ZYGOTE: '1' }) });
  const z = { proc, tmp, waiting: new Map(), exits: new Map(), exitWaits: new Map(), clean: true, ended: null };
  proc.on('message', (raw, handle) => {
    let m = null;
    try { m = raw && typeof raw.json === 'string' ? JSON.parse(raw.json) : null; } catch (e) { /* not an answer */ }
    const w = m && z.waiting.get(raw.nonce);
    if (m && raw.nonce === 'exited') {
      z.exits.set(m.pid, m);
      const wake = z.exitWaits.get(m.pid);
      if (wake) wake();
    } else if (w) {
      w(m, handle);
      return;
    }
    if (handle) handle.destroy();
  });
  proc.on('exit', (code, signal) => {
    z.ended = { code, signal };
    if (zygote === z) zygote = null;
    for (const w of z.waiting.values()) w({ error: 'the zygote ended' });
    z.waiting.clear();
    for (const wake of z.exitWaits.values()) wake();
  });
  proc.on('error', () => {});
  const nonce = crypto.randomBytes(16).toString('hex');
  z.ready = new Promise((resolve) => {
    const timer = setTimeout(() => { resolve(false); try { process.kill(-proc.pid, 'SIGKILL'); } catch (e) { /* gone */ } }, 60000);
    z.waiting.set(nonce, (m) => { z.waiting.delete(nonce); clearTimeout(timer); resolve(!!(m && m.warmed > 0)); });
    proc.send({ op: 'warm', nonce, dir: WARM_DIR });
  });
  return z;
}

// A child's exit status, as its zygote reaped it (null where none comes within `ms`).
function exitStatus(z, pid, ms) {
  if (z.exits.has(pid)) return Promise.resolve(z.exits.get(pid));
  return new Promise((resolve) => {
    const done = () => { clearTimeout(timer); z.exitWaits.delete(pid); resolve(z.exits.get(pid) || null); };
    const timer = setTimeout(done, ms);
    z.exitWaits.set(pid, done);
  });
}

// One forked host, behind the face of a child_process.fork child (pid, send, stdout, stderr and the
// 'message' and 'exit' events) that startHost and hostCall use. Requests sent before the fork is
// done wait for it; its messages are the JSON lines of Node's IPC channel.
function forkedHost(tmp) {
  const proc = new EventEmitter();
  proc.pid = null;
  proc.stdout = new EventEmitter();
  proc.stderr = new EventEmitter();
  const queue = [];
  let channel = null;
  proc.send = (msg) => { const line = `${JSON.stringify(msg)}\n`; if (channel) channel.write(line); else queue.push(line); };
  proc.forking = (async () => {
    if (!zygote) zygote = startZygote();
    const z = zygote;
    if (!(await z.ready)) throw new Error('the zygote did not warm');
    try { process.kill(z.proc.pid, 'SIGCONT'); } catch (e) { /* gone: the fork fails below */ }
    const nonce = crypto.randomBytes(16).toString('hex');
    // One fork at a time: a child copies its zygote's channel as it is, and a handle still on its
    // way (or not yet acknowledged) to this runner would be sent again from the child's channel,
    // whose messages Node then holds back for an acknowledgement that never comes.
    const turn = forkTurn;
    let done;
    forkTurn = new Promise((ok) => { done = ok; });
    await turn;
    const parts = await new Promise((resolve, reject) => {
      const got = {};
      const timer = setTimeout(() => { z.waiting.delete(nonce); reject(new Error('fork timed out')); }, 10000);
      z.waiting.set(nonce, (m, handle) => {
        if (!m || m.error || !handle) { z.waiting.delete(nonce); clearTimeout(timer); if (handle) handle.destroy(); reject(new Error((m && m.error) || 'fork failed')); return; }
        got.pid = m.pid;
        got[m.kind] = handle;
        if (got.channel && got.output) { z.waiting.delete(nonce); clearTimeout(timer); resolve(got); }
      });
      z.proc.send({ op: 'fork', nonce, tmp });
    }).finally(() => setImmediate(done)); // the acknowledgements go out first
    return { z, parts };
  })();
  proc.forking.then(({ z, parts }) => {
    zygoteFailures = 0;
    proc.pid = parts.pid;
    channel = parts.channel;
    const output = parts.output;
    output.on('data', (d) => proc.stdout.emit('data', d));
    output.on('error', () => {});
    channel.on('error', () => {});
    const outputClosed = new Promise((ok) => output.on('close', ok));
    let buf = '';
    channel.setEncoding('utf8');
    channel.on('data', (d) => {
      buf += d;
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        let m = null;
        try { m = JSON.parse(line); } catch (e) { /* not a message */ }
        if (m) proc.emit('message', m);
      }
    });
    // Gone when its channel closes: what it wrote last is read first (a stray of it may hold the
    // output pipe open; it is not waited for long).
    channel.on('close', () => {
      const wait = new Promise((ok) => setTimeout(ok, 500));
      Promise.race([outputClosed, wait]).then(() => exitStatus(z, parts.pid, 200)).then((st) => {
        output.destroy();
        // A child its zygote did not reap has no status of its own: when the zygote is gone (killed
        // with it, as an operator or the machine kills every host), the zygote's end is reported.
        const end = st || z.ended || null;
        proc.emit('exit', end ? end.code : null, end ? end.signal : null);
      });
    });
    for (const line of queue.splice(0)) channel.write(line);
    if (proc.doomed) { try { process.kill(-proc.pid, 'SIGKILL'); } catch (e) { /* gone */ } }
  }, () => {
    zygoteFailures++;
    if (zygote && zygoteFailures > 1) { try { process.kill(-zygote.proc.pid, 'SIGKILL'); } catch (e) { /* gone */ } zygote = null; }
    proc.emit('exit', null, null);
  });
  return proc;
}

// Processes in a process group other than its leader (what a test left running: a background
// child, a fork bomb). Read from /proc because the image has no procps.
function strays(pgid) {
  let n = 0;
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d) || Number(d) === pgid) continue;
    try {
      const stat = fs.readFileSync(`/proc/${d}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(f[2]) === pgid && f[0] !== 'Z') n++;
    } catch (e) { /* exited meanwhile */ }
  }
  return n;
}

function killHost(h) {
  if (!h.proc.pid) { h.proc.doomed = true; return; } // still being forked: killed once it exists
  try { process.kill(-h.proc.pid, 'SIGKILL'); } catch (e) { /* gone */ }
}

// The processes no clean-up may end: the hosts and the zygote.
function hostPids() {
  return hosts.concat(fresh).filter(Boolean).map((h) => h.proc.pid).concat(zygote ? [zygote.proc.pid] : []).filter(Boolean);
}

// Hosts whose fork is under way have no pid yet: a clean-up waits for them, or would end them.
function forksDone() {
  return Promise.all(hosts.concat(fresh).filter((h) => h && !h.proc.pid && h.proc.forking).map((h) => h.proc.forking.catch(() => {})));
}

function hostIn(set, slot) {
  if (!set[slot]) set[slot] = startHost(set, slot);
  return set[slot];
}

// Send one message to a warm Jest host and wait for the answer carrying its nonce.
async function hostCall(set, slot, msg, timeoutMs, outputCap) {
  let h = hostIn(set, slot);
  if (msg.op !== 'warm') {
    await h.ready; // its template run, if one is under way (a host serves one request at a time)
    h = hostIn(set, slot); // the warm-up may have ended it
    h.clean = false;
  }
  const nonce = crypto.randomBytes(16).toString('hex');
  const oomBefore = oomKills();
  const t0 = Date.now();
  h.outN = 0; h.tail = []; h.reason = null; h.heapOom = false; h.cap = outputCap || (1 << 20);
  // Every host learns the pristine workspace once, before its first look at the workspace: a host
  // started later (after a crash, or for another shard) loads the Jest config anew.
  // (A template warm-up is not that look: the host drops what a `warm` message carries.)
  if (pristine && !h.toldPristine && msg.op !== 'warm') { msg = Object.assign({ pristine, transform_keys: transformKeys }, msg); h.toldPristine = true; }
  return new Promise((resolve) => {
    const timer = setTimeout(() => { h.reason = 'timeout'; killHost(h); }, timeoutMs || 30000);
    h.pending = { nonce, resolve, timer };
    h.generation = generation;
    h.proc.send(Object.assign({ nonce }, msg));
  }).then((r) => {
    const duration_ms = Date.now() - t0;
    // Nothing a test started outlives the run: if it left processes behind, recycle the host.
    // A fresh host serves one graded run and no other request; with the `warm_hosts` speed path
    // off (harness/base/speed.py), an agent's host serves one request too.
    const once = set === fresh || !WARM_HOSTS;
    if (set[slot] === h && (once ? msg.op !== 'warm' : strays(h.proc.pid) > 0)) {
      killHost(h);
      set[slot] = null;
    }
    if (r.ok && r.result.stateful) h.stateful = true;
    if (r.ok) return { ok: true, answer: r.result, duration_ms, output_bytes: h.outN };
    let reason = r.reason;
    if (!reason && oomKills() > oomBefore) reason = 'memory_limit';
    if (!reason && h.heapOom) reason = 'memory_limit'; // V8's own heap limit (set below the cgroup's)
    return { ok: false, reason: reason || 'no_result_record', exit_code: r.code, signal: r.signal,
      output_tail: r.tail, duration_ms, output_bytes: h.outN };
  });
}

// One run of the template project (warm-template.js) in a new host, ahead of any request: the
// workspace's first run is then a warm one. A failed warm-up costs nothing but the warmth. The
// template lies where only this runner writes, so workspace code may run meanwhile in other
// processes; what the guard finds during the template run is dropped.
const warming = new Set();
function settled() { return Promise.all([...warming]); }
function warmHost(set, i) {
  const h = hostIn(set, i);
  h.warming = true;
  const p = (h.proc.forking || hostCall(set, i, { op: 'warm', dir: WARM_DIR }, 60000)).catch(() => {})
    .finally(() => { warming.delete(p); h.warming = false; });
  warming.add(p);
  h.ready = p;
  return p;
}

// A fresh host warming for a later graded run gives way to the agent's own work, which waits on
// it: stopped while a Jest run or a command of the agent runs, continued after (its warm-up's
// deadline is long, and a warm-up that fails costs only its warmth).
async function givingWay(work) {
  const paused = fresh.filter((h) => h && h.warming && h.proc.pid);
  for (const h of paused) { try { process.kill(-h.proc.pid, 'SIGSTOP'); } catch (e) { /* gone */ } }
  try {
    return await work();
  } finally {
    for (const h of paused) { try { process.kill(-h.proc.pid, 'SIGCONT'); } catch (e) { /* gone */ } }
  }
}

// Held-out test files as the harness wrote them for a graded run (verify.py `_held_out_run`):
// root's alone, mode 0600, so that no process of the sandbox user (the code under test, a command
// it starts, a stray of the agent's) can read their expected values; the fresh hosts get their
// text with the request (sealed.js). Absolute path -> base64.
const sealed = new Map();

// The workspace as the writes of tools leave it (the sandbox user cannot write it): one number more
// at every write. An agent's host whose transformer keeps state between runs (transform-cache.js
// `keepsState`) serves no run after a change: the next starts in a new host.
let generation = 0;

let testFiles = null; // the test files of the pristine workspace, listed at init
let protectedFiles = []; // those and the files the Jest config names, sent with every run
let pristine = null; // each workspace file's inode:size:ctime as init left it (guard.js `hostLoads`)
let transformKeys = null; // each pristine file's token for the transform store (transform-cache.js), from init

// What the pristine workspace holds, by identity rather than content (file-sig.js); node_modules and
// .git are left out, as listFiles leaves them: no tool writes them.
function fileSigs() {
  const out = {};
  for (const f of listFiles(WS, 20000).files) {
    try { out[f] = fileSig(path.join(WS, f)); } catch (e) { /* gone meanwhile: not pristine */ }
  }
  return out;
}

// The guard's records of the shards of one run, as one.
function mergeGuards(guards) {
  if (guards.some((g) => !g)) return null;
  return { files: Object.assign({}, ...guards.map((g) => g.files)), tamper: [].concat(...guards.map((g) => g.tamper)) };
}

// Reports of the shards of one run, as one report.
function mergeReports(reports) {
  const ran = reports.filter((r) => r.numTotalTestSuites > 0);
  const sum = (k) => reports.reduce((a, r) => a + r[k], 0);
  return {
    success: ran.length > 0 && ran.every((r) => r.success),
    numTotalTestSuites: sum('numTotalTestSuites'), numFailedTestSuites: sum('numFailedTestSuites'),
    numRuntimeErrorTestSuites: sum('numRuntimeErrorTestSuites'), numTotalTests: sum('numTotalTests'),
    numPassedTests: sum('numPassedTests'), numFailedTests: sum('numFailedTests'),
    numPendingTests: sum('numPendingTests'), testResults: [].concat(...reports.map((r) => r.testResults)),
  };
}

const strings = (v) => (Array.isArray(v) ? v.map(String) : []);

async function jestRun(req) {
  const related = Array.isArray(req.related) && req.related.length ? req.related.map(String) : null;
  // A graded run scoped to the change (verify.py `_scope`): each fresh host lists the same files.
  const scope = req.fresh && req.scope && typeof req.scope === 'object'
    ? { changed: strings(req.scope.changed), keep: strings(req.scope.keep), include: strings(req.scope.include) } : null;
  const files = !related && !scope && req.test_files && req.test_files.length ? req.test_files : null;
  const n = Math.min(N_HOSTS, files ? files.length : (testFiles || []).length) || 1;
  const t0 = Date.now();
  const set = req.fresh ? fresh : hosts;
  for (let i = 0; i < n && !req.fresh; i++) {
    const h = hosts[i];
    if (h && h.stateful && h.generation !== generation) { killHost(h); hosts[i] = null; }
  }
  // A graded run: no process that workspace code started or ran in is left to act on it (a stray
  // of a test or a command that left its process group, and the agent's own hosts that ran
  // workspace code: a timer left in one could signal the graded host once it is the sandbox user,
  // or write into its TMPDIR); the hosts it runs in are fresh (see `fresh`), and their TMPDIRs are
  // opened to the sandbox user only now, empty. The agent's next run forks a new host.
  if (req.fresh && AS_ROOT) {
    await forksDone();
    hosts.forEach((h, i) => { if (h && !h.clean) { killHost(h); hosts[i] = null; } });
    endProcesses(hostPids(), SANDBOX_ID);
    for (let i = 0; i < n; i++) { const h = hostIn(fresh, i); if (h.tmp) fs.chmodSync(h.tmp, 0o1777); }
  }
  const parts = await Promise.all([...Array(n).keys()].map((i) => hostCall(set, i,
    { test_files: files, name_pattern: req.name_pattern || null, shard: n > 1 ? `${i + 1}/${n}` : null,
      protected: protectedFiles, related, scope, project_tests: related ? testFiles : null,
      sealed: req.fresh && sealed.size ? Object.fromEntries(sealed) : null },
    req.timeout_ms, req.output_cap)));
  // Which files a related or scoped run reaches is Jest's answer: it expects what its hosts listed
  // (every host lists for itself; the union, should they differ).
  const planned = scope || related ? [...new Set([].concat(...parts.map((r) => (r.ok && r.answer.planned) || [])))].sort() : null;
  const expected = planned || (files ? files.filter((f) => (testFiles || []).includes(f)) : (testFiles || []));
  const duration_ms = Date.now() - t0;
  const output_bytes = parts.reduce((a, r) => a + r.output_bytes, 0);
  const failed = parts.find((r) => !r.ok);
  if (failed) return Object.assign({ evidence: 'none', expected_files: expected, workspace: WS }, failed, { duration_ms });
  const broken = parts.find((r) => !r.answer.report);
  return { evidence: 'nonce', workspace: WS, expected_files: expected, duration_ms, output_bytes,
    report: broken ? null : mergeReports(parts.map((r) => r.answer.report)),
    // Kept when Jest itself failed: what the guard refused may be why (a config that loads a changed file).
    guard: mergeGuards(parts.map((r) => r.answer.guard)),
    error: broken ? broken.answer.error || 'no report' : null,
    jest_ms: Math.max(...parts.map((r) => r.answer.jest_ms || 0)) };
}

// After a graded run its fresh hosts are gone: new ones warm while the agent works. A workspace of
// one test file needs one.
function refillFresh() {
  const want = Math.min(N_HOSTS, Math.max(1, (testFiles || []).length));
  for (let i = 0; i < want; i++) if (!fresh[i]) warmHost(fresh, i);
}

// ---------------------------------------------------------------- file tools
function listFiles(dir, max) {
  const found = [];
  let truncated = false;
  const walk = (d) => {
    let entries;
    try { entries = fs.readdirSync(d, { withFileTypes: true }); } catch (e) { return; }
    entries.sort((a, b) => (a.name < b.name ? -1 : 1));
    for (const e of entries) {
      if (e.name === '.git' || e.name === 'node_modules') continue;
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else { if (found.length >= max) { truncated = true; return; } found.push(rel(p)); }
      if (truncated) return;
    }
  };
  walk(dir);
  return { files: found, truncated };
}

function search(pattern, dir, max, flags) {
  let re;
  try { re = new RegExp(pattern, flags || ''); } catch (e) { throw new ToolError(`invalid regular expression: ${e.message}`); }
  const matches = [];
  let truncated = false;
  const scan = listFiles(dir, 50000);
  if (scan.truncated) truncated = true;
  for (const f of scan.files) {
    let text;
    try {
      const st = fs.statSync(path.join(WS, f));
      if (st.size > MAX_READ) continue;
      text = fs.readFileSync(path.join(WS, f), 'utf8');
    } catch (e) { continue; }
    const lines = text.split('\n');
    for (let i = 0; i < lines.length; i++) {
      const m = re.exec(lines[i]);
      re.lastIndex = 0;
      if (m) {
        if (matches.length >= max) { truncated = true; break; }
        matches.push({ file: f, line: i + 1, column: m.index + 1, text: lines[i].slice(0, 400) });
      }
    }
    if (truncated) break;
  }
  return { matches, truncated };
}

function writeFileSafe(p, data, { mode = null } = {}) {
  fs.mkdirSync(path.dirname(p), { recursive: true, mode: 0o755 });
  // Re-check after mkdir: a symlinked parent created meanwhile must not redirect the write.
  if (!inside(fs.realpathSync(path.dirname(p)))) throw new ToolError('path leaves the workspace (through a symlink)');
  if (mode !== null) {
    // A new file (a new inode) that has `mode` before it holds anything, renamed into place: a
    // descriptor opened on an earlier file of that name never sees this text.
    const tmp = path.join(path.dirname(p), `.etai-new-${crypto.randomBytes(8).toString('hex')}`);
    try {
      fs.writeFileSync(tmp, data, { mode, flag: 'wx' });
      fs.renameSync(tmp, p);
    } finally { fs.rmSync(tmp, { force: true }); }
    return;
  }
  try { if (fs.lstatSync(p).isSymbolicLink()) fs.unlinkSync(p); } catch (e) { /* new file */ }
  fs.writeFileSync(p, data);
}

// A sealed file written again by any other write is an ordinary file again: removed first, so the
// write makes a new one with the usual mode.
function unseal(p) {
  if (sealed.delete(p)) fs.rmSync(p, { force: true });
}

const GIT_ENV = Object.assign({}, process.env, {
  GIT_AUTHOR_NAME: 'etai', GIT_AUTHOR_EMAIL: 'etai@localhost', GIT_COMMITTER_NAME: 'etai',
  GIT_COMMITTER_EMAIL: 'etai@localhost', GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null',
  HOME: process.env.HOME || '/scratch',
});
// Nothing in the workspace may make git run a program: no hooks, no fsmonitor, no external diff.
const GIT_SAFE = ['-c', 'core.hooksPath=/dev/null', '-c', 'core.fsmonitor=false', '-c', 'diff.external=',
  '-c', 'core.pager=cat', '-c', 'safe.directory=*'];

function git(args) {
  const r = cp.spawnSync('git', GIT_SAFE.concat(args), { cwd: WS, env: GIT_ENV, maxBuffer: 8 << 20, timeout: 20000 });
  if (r.error) throw new ToolError(`git failed: ${r.error.message}`);
  if (r.status !== 0) throw new ToolError(`git ${args[0]} failed: ${String(r.stderr).trim().slice(0, 500)}`);
  return String(r.stdout);
}

// ---------------------------------------------------------------- requests
const handlers = {
  ping: () => ({ pong: true, workspace: WS, pid: process.pid }),

  init: async (req) => {
    fs.mkdirSync(WS, { recursive: true });
    for (const [name, b64] of Object.entries(req.files || {})) {
      writeFileSafe(resolvePath(name, { mustExist: false, write: true }), Buffer.from(b64, 'base64'));
    }
    // A baseline commit so git_diff/git_status show exactly what the agent changed. A suite's
    // dependencies (a read-only mount no tool writes) stay out of it: hashing thousands of their
    // files went past git's deadline on a busy machine.
    git(['init', '-q']);
    fs.mkdirSync(path.join(WS, '.git', 'info'), { recursive: true });
    fs.appendFileSync(path.join(WS, '.git', 'info', 'exclude'), '/node_modules\n');
    git(['add', '-A']);
    git(['-c', 'commit.gpgsign=false', 'commit', '-q', '--allow-empty', '-m', 'etai baseline']);
    transformKeys = req.transform_keys && typeof req.transform_keys === 'object' ? req.transform_keys : null;
    pristine = fileSigs();
    let listed = req.listed; // what an earlier init of these very files listed (harness/sandbox/_docker.py)
    if (!listed) {
      untrusted = true; // the listing loads the workspace's Jest config into the host
      const r = await hostCall(hosts, 0, { op: 'list' }, 60000);
      listed = r.ok ? { test_files: r.answer.files, config_files: r.answer.config_files || [], support_files: r.answer.support_files || [] } : {};
    }
    testFiles = listed.test_files || [];
    const configFiles = listed.config_files || [];
    const supportFiles = listed.support_files || []; // the tests' helpers (test-support.js)
    protectedFiles = testFiles.concat(configFiles, supportFiles);
    // The other hosts are needed only by runs of several test files: started now, while the agent
    // thinks, and not for a workspace of one (each costs ~0.5 s of CPU to load and warm; #15).
    if (testFiles.length > 1) for (let i = 1; i < N_HOSTS; i++) warmHost(hosts, i);
    refillFresh();
    return { files: Object.keys(req.files || {}).length, test_files: testFiles, config_files: configFiles, support_files: supportFiles };
  },

  jest: (req) => {
    untrusted = true;
    return (req.fresh ? jestRun(req) : givingWay(() => jestRun(req))).finally(() => {
      if (!req.fresh) return;
      // Nor does anything the graded run started outlive it (a child that left its process group).
      if (AS_ROOT) endProcesses(hostPids(), SANDBOX_ID);
      refillFresh();
      if (!hosts[0]) warmHost(hosts, 0); // the agent's, ended for the graded run
    });
  },

  reset: async () => { await settled(); return resetContainer(); },

  // What a host's own realm loaded and where it looks for modules: `set` 'fresh' asks the host that
  // would serve the next graded run, otherwise the agent's first host.
  host_paths: async (req) => {
    const r = await hostCall(req.set === 'fresh' ? fresh : hosts, 0, { op: 'paths' }, 30000);
    if (!r.ok) throw new Error(`host_paths: ${r.reason}`);
    // code-cache.js stats, and whether the host was forked from the zygote
    return Object.assign({ code_cache: r.answer.code_cache, forked: r.answer.forked }, r.answer.paths);
  },

  read: (req) => {
    const p = resolvePath(req.path);
    const st = fs.statSync(p);
    if (st.isDirectory()) throw new ToolError(`${req.path} is a directory`);
    const fd = fs.openSync(p, 'r');
    const buf = Buffer.alloc(Math.min(st.size, MAX_READ));
    fs.readSync(fd, buf, 0, buf.length, 0);
    fs.closeSync(fd);
    return { content_b64: buf.toString('base64'), size: st.size, truncated: st.size > MAX_READ };
  },

  write: (req) => {
    const p = resolvePath(req.path, { mustExist: false, write: true });
    const data = Buffer.from(req.content_b64 || '', 'base64');
    generation++;
    if (req.sealed) {
      writeFileSafe(p, data, { mode: 0o600 });
      sealed.set(p, data.toString('base64'));
    } else {
      unseal(p);
      writeFileSafe(p, data);
    }
    return { path: rel(p), bytes: fs.statSync(p).size };
  },

  edit: (req) => {
    const p = resolvePath(req.path, { write: true });
    const text = fs.readFileSync(p, 'utf8');
    if (typeof req.old !== 'string' || req.old === '') throw new ToolError('old must be a non-empty string');
    const n = text.split(req.old).length - 1;
    if (n === 0) throw new ToolError(`old text not found in ${req.path}`);
    if (n > 1 && !req.all) throw new ToolError(`old text occurs ${n} times in ${req.path}; make it unique`);
    const idx = text.indexOf(req.old);
    const before = text.slice(0, idx);
    const next = req.all ? text.split(req.old).join(req.new) : before + req.new + text.slice(idx + req.old.length);
    unseal(p);
    generation++;
    writeFileSafe(p, next);
    const line = before.split('\n').length;
    const column = idx - before.lastIndexOf('\n');
    return { path: rel(p), replacements: req.all ? n : 1, line, column };
  },

  list: (req) => {
    const d = resolvePath(req.path || '.');
    return listFiles(d, req.max || 1000);
  },

  search: (req) => search(req.pattern, resolvePath(req.path || '.'), req.max || 200, req.flags),

  git: (req) => {
    const allowed = { diff: ['diff', '--no-color', '--no-ext-diff'], status: ['status', '--porcelain=v1', '-uall'] };
    if (!allowed[req.cmd]) throw new ToolError(`git ${req.cmd} is not allowed`);
    if (req.cmd === 'diff') git(['add', '-A', '-N']); // show new files in the diff too
    return { text: git(allowed[req.cmd].concat(req.args || [])) };
  },

  hash: (req) => {
    const out = {};
    for (const f of req.paths || []) {
      try { out[f] = crypto.createHash('sha256').update(fs.readFileSync(resolvePath(f))).digest('hex'); } catch (e) { out[f] = null; }
    }
    return { hashes: out };
  },

  exec: async (req) => {
    untrusted = true;
    return givingWay(() => runCommand(req.argv, { timeoutMs: req.timeout_ms, outputCap: req.output_cap,
      input: req.stdin_b64 ? Buffer.from(req.stdin_b64, 'base64') : null }));
  },
};

let queue = Promise.resolve();
function answer(id, body) { protocolOut.write(JSON.stringify(Object.assign({ id }, body)) + '\n'); }

function handle(line) {
  let req;
  try { req = JSON.parse(line); } catch (e) { answer(null, { ok: false, error: 'bad request: not JSON' }); return; }
  queue = queue.then(async () => {
    const fn = handlers[req.op];
    if (!fn) { answer(req.id, { ok: false, error: `unknown op ${req.op}` }); return; }
    try {
      answer(req.id, { ok: true, result: await fn(req) });
    } catch (e) {
      const tool = e instanceof ToolError || (e && e.code && /^E[A-Z]+$/.test(e.code));
      answer(req.id, { ok: false, error: tool ? e.message : String(e && e.stack || e), tool_error: !!tool });
    }
  });
}

// ---------------------------------------------------------------- reuse of a container
// After an episode the harness's pool may ask this runner to `reset` the container for the next
// one instead of removing it. The runner ends every process but the container's own (tini as PID 1,
// and its `sleep`) and itself, and empties the scratch tmpfs: the root file system is read-only
// and System V and POSIX IPC are switched off (sysctls, harness/sandbox/_docker.py), so those
// processes and that folder are all an episode could leave. One exception: Jest hosts that ran
// nothing but the template are kept when no workspace code ran at all in the episode (no Jest
// run, no command, no listing of the workspace's config): the sandbox user then ran nothing but
// them. Any doubt is an error, and the harness removes the container instead.
let untrusted = false; // workspace code has run since the last reset

function procInfo(pid) {
  try {
    const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    const field = (k) => (status.match(new RegExp(`^${k}:\\s*(\\S+)`, 'm')) || [])[1];
    return { uid: Number(field('Uid')), ppid: Number(field('PPid')), state: field('State'),
      cmd: fs.readFileSync(`/proc/${pid}/cmdline`, 'latin1') };
  } catch (e) { return null; } // gone meanwhile
}

// Every process but PID 1, the container's `sleep`, this runner and `keep` (of the user `uid` alone
// when one is given).
function endProcesses(keep, uid = null) {
  for (let round = 0; ; round++) {
    let alive = 0;
    for (const d of fs.readdirSync('/proc')) {
      const pid = Number(d);
      if (!/^\d+$/.test(d) || pid === 1 || pid === process.pid || keep.includes(pid)) continue;
      const p = procInfo(pid);
      if (!p || p.state === 'Z') continue; // a zombie runs nothing; PID 1 (tini) reaps it
      if (p.uid === 0 && p.ppid === 1 && p.cmd === 'sleep\0infinity\0') continue; // the container's own
      if (uid !== null && p.uid !== uid) continue;
      alive++;
      try { process.kill(pid, 'SIGKILL'); } catch (e) { /* gone */ }
    }
    if (alive === 0) return;
    if (round >= 50) throw new Error(`reset: ${alive} processes still alive after ${round} rounds`);
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 10); // let SIGKILL land
  }
}

// A real-project suite's dependencies: a read-only bind mount at <workspace>/node_modules
// (harness/sandbox/_docker.py), made with the container, the same for every episode of the suite.
// Not the episode's, and not removable (rmdir of a mount point: EBUSY, which made every reset of
// such a container fail and the pool start a new one). Only that path, and only while it is
// another file system: the sandbox user cannot mount anything.
function isDepsMount(p) {
  if (p !== path.join(WS, 'node_modules')) return false;
  try { return fs.lstatSync(p).dev !== fs.lstatSync(WS).dev; } catch (e) { return false; }
}

function emptyScratch(scratch) {
  // What the sandbox user made, it removes itself (this process has no CAP_DAC_OVERRIDE or
  // CAP_FOWNER, so it may not unlink inside that user's folders); then the rest goes. The
  // workspace folder itself stays (a kept host's working directory), emptied. Its folders are
  // opened up first (chmod before find reads each one: one left 000 by the episode); `-xdev`: no
  // walk of the dependencies' mount (thousands of files, none of them the sandbox user's).
  cp.spawnSync('sh', ['-c', 'find "$1" -xdev -type d -user "$2" -exec chmod u+rwx {} \\; 2>/dev/null; find "$1" -xdev -depth -mindepth 1 -user "$2" -delete 2>/dev/null; true',
    'sh', scratch, String(SANDBOX_ID)], { uid: SANDBOX_ID, gid: SANDBOX_ID, timeout: 20000, stdio: 'ignore' });
  for (const dir of [scratch, WS]) {
    for (const e of fs.readdirSync(dir)) {
      const p = path.join(dir, e);
      if (p !== WS && !isDepsMount(p)) fs.rmSync(p, { recursive: true, force: true });
    }
  }
  const left = fs.readdirSync(scratch).filter((e) => path.join(scratch, e) !== WS)
    .concat(fs.readdirSync(WS).filter((e) => !isDepsMount(path.join(WS, e))));
  if (left.length) throw new Error(`reset: the scratch space still holds ${left.join(', ')}`);
  for (const kind of ['shm', 'msg', 'sem']) {
    let lines = [];
    try { lines = fs.readFileSync(`/proc/sysvipc/${kind}`, 'utf8').trim().split('\n').slice(1); } catch (e) { /* none */ }
    if (lines.some((l) => l.trim())) throw new Error(`reset: System V ${kind} objects exist`);
  }
}

// A host is kept only while it has served nothing but its template run (and is not stopped): it
// has then run no workspace code, and it reads nothing the sandbox user can write (guard.js
// `hostLoads`, HOST_HOME). Its TMPDIR is emptied with the rest and made again.
function resetContainer() {
  if (!AS_ROOT || path.dirname(WS) === '/') throw new Error('reset: only a root runner with a scratch folder resets');
  const keep = (h) => h && h.clean && !/^[tT]/.test((procInfo(h.proc.pid) || { state: 'T' }).state);
  for (const set of [hosts, fresh]) {
    set.forEach((h, i) => { if (h && !keep(h)) { killHost(h); set[i] = null; } });
  }
  if (zygote && !keep(zygote)) { killHost(zygote); zygote = null; }
  const keptHosts = hosts.concat(fresh).filter(Boolean);
  const kept = keptHosts.concat(zygote ? [zygote] : []);
  endProcesses(hostPids());
  emptyScratch(path.dirname(WS));
  makeScratch();
  for (const h of kept) {
    const mode = h.set === fresh ? 0o700 : 0o1777; // a fresh host's is opened at its graded run
    if (h.tmp) { fs.mkdirSync(h.tmp, { mode }); fs.chmodSync(h.tmp, mode); }
  }
  testFiles = null; protectedFiles = []; pristine = null; untrusted = false; sealed.clear();
  transformKeys = null;
  if (!hosts[0]) warmHost(hosts, 0); // answered now; the next Jest run waits for the warm-up
  if (!fresh[0]) warmHost(fresh, 0);
  return { reset: true, kept_hosts: keptHosts.length };
}

let buf = '';
process.stdin.on('data', (d) => {
  buf += d;
  let i;
  while ((i = buf.indexOf('\n')) >= 0) { const line = buf.slice(0, i); buf = buf.slice(i + 1); if (line.trim()) handle(line); }
});
process.stdin.on('end', () => { hosts.forEach((h) => h && killHost(h)); if (zygote) killHost(zygote); process.exit(0); });
function makeScratch() {
  fs.mkdirSync(WS, { recursive: true, mode: 0o755 });
  if (process.env.TMPDIR) {
    fs.mkdirSync(process.env.TMPDIR, { recursive: true });
    if (AS_ROOT) fs.chmodSync(process.env.TMPDIR, 0o1777); // the sandbox user's scratch space
  }
  if (AS_ROOT) fs.mkdirSync(HOST_HOME, { recursive: true, mode: 0o755 }); // empty, and not theirs
  fs.mkdirSync(WARM_DIR, { recursive: true, mode: 0o755 });
  if (TRANSFORM_OUT) {
    fs.mkdirSync(TRANSFORM_OUT, { recursive: true });
    fs.chmodSync(TRANSFORM_OUT, 0o1777); // written by the hosts (the sandbox user)
  }
  require('./warm-template').writeTo(WARM_DIR);
}
makeScratch();
hosts[0] = startHost(hosts, 0); // load Jest now, while the sandbox waits in the pool
answer(null, { ok: true, result: { ready: true, pid: process.pid } });
queue = queue.then(() => warmHost(hosts, 0)).then(() => { if (!fresh[0]) warmHost(fresh, 0); });

'use strict';
// The ETAI viewer (reports/view/_page.py embeds this file). Everything an agent wrote is data: it
// reaches the page only through esc() or textContent, never as markup, and no link takes its
// target from it (every href is '#' plus an id this script encodes).
(function () {
  const INDEX = JSON.parse(document.getElementById('etai-index').textContent);
  const C = Object.fromEntries(INDEX.columns.map((c, i) => [c, i]));
  const ROWS = INDEX.rows;
  const app = document.getElementById('app');
  const crumb = document.getElementById('crumb');
  const PAGE = 200; // rows the list renders at a time: filtering 5,000 stays fast
  const FOLD_LINES = 12;
  const FOLD_CHARS = 1500;
  const MAX_CHARS = 200000; // beyond this a text is cut in the view (the row keeps it whole)
  const ANSI = /\u001b\[[0-?]*[ -\/]*[@-~]|\u001b[@-_]/g;
  const CONTROL = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/g;
  const CHECKS = {
    protected_files: 'test files, fixtures or Jest/Babel config changed',
    tamper: 'the guard found workspace code interfering with the tests or Jest',
    run: 'the verification run did not finish with the runner\'s evidence',
    verification: 'a verification test fails, or none passed',
    gold: 'a verification test the reference passed does not pass as it did (alone: it passed with fewer assertions, special-cased)',
    regression: 'a test that passed at the start fails now',
    reported: 'a test file Jest listed at the start did not report',
    held_out: 'green on the visible tests, red on held-out tests the agent never saw: special-cased when a failing one is a near twin of a passing visible case (it calls only project functions they call), else an incomplete fix',
  };

  function clean(v) {
    let s = String(v == null ? '' : v);
    if (s.length > MAX_CHARS) s = s.slice(0, MAX_CHARS) + `\n… (${s.length - MAX_CHARS} more characters not shown)`;
    return s.replace(ANSI, '').replace(CONTROL, (c) => '\\x' + c.charCodeAt(0).toString(16).padStart(2, '0'));
  }
  function esc(v) {
    return clean(v).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]);
  }
  const num = (v, d) => (v == null ? '–' : typeof v === 'number' ? v.toFixed(d) : esc(v));
  const badge = (s) => `<span class="badge st-${esc(s)}">${esc(s)}</span>`;
  const href = (kind, id) => '#' + kind + '/' + encodeURIComponent(id);
  function fold(text, open) {
    const s = clean(typeof text === 'string' ? text : JSON.stringify(text, null, 2));
    const lines = s.split('\n').length;
    if (lines <= FOLD_LINES && s.length <= FOLD_CHARS) return `<pre>${esc(s)}</pre>`;
    return `<details class="fold"${open ? ' open' : ''}><summary>${lines} lines, ${s.length} characters</summary><pre>${esc(s)}</pre></details>`;
  }

  // ---- bodies: embedded JSON parsed on first open (static file) or fetched (etai view --port)
  const bodies = new Map();
  async function body(id) {
    if (bodies.has(id)) return bodies.get(id);
    const el = document.getElementById('ep-' + id);
    let b;
    if (el) b = JSON.parse(el.textContent);
    else {
      const r = await fetch('episode/' + id);
      if (!r.ok) throw new Error(`episode ${id}: HTTP ${r.status}`);
      b = await r.json();
    }
    bodies.set(id, b);
    return b;
  }

  // ---- the episode list
  const state = { agent: '', status: '', intent: '', run: '', outcome: '', tampered: '', special: '', incomplete: '', q: '', sort: 'id', desc: false, shown: PAGE };
  const FILTERS = [['run', 'run'], ['agent', 'agent'], ['status', 'status'], ['intent', 'intent']];
  const LIST = [['agent', 'agent'], ['session', 'session'], ['intent', 'intent'], ['status', 'status'], ['green', 'green at step'], ['steps', 'steps'], ['cursor_px', 'cursor px'], ['duration_s', 'duration s'], ['run', 'run']];
  const distinct = (c) => [...new Set(ROWS.map((r) => r[C[c]]))].filter((x) => x !== '').sort();
  function matches(r) {
    for (const [k] of FILTERS) if (state[k] && r[C[k]] !== state[k]) return false;
    if (state.outcome === 'passed' && r[C.status] !== 'passed') return false;
    if (state.outcome === 'failed' && r[C.status] === 'passed') return false;
    if (state.tampered && r[C.tampered] !== (state.tampered === 'yes')) return false;
    if (state.special && r[C.special] !== (state.special === 'yes')) return false;
    if (state.incomplete && r[C.incomplete] !== (state.incomplete === 'yes')) return false;
    if (state.q && !r[C.session].toLowerCase().includes(state.q)) return false;
    return true;
  }
  function sorted(rows) {
    const i = C[state.sort];
    const sign = state.desc ? -1 : 1;
    return rows.sort((a, b) => {
      const x = a[i], y = b[i];
      if (x == null || y == null) return x == null ? (y == null ? 0 : 1) : -1; // none last
      return (x < y ? -1 : x > y ? 1 : 0) * sign || a[0] - b[0];
    });
  }
  function select(name, label, values) {
    const opts = values.map((v) => `<option value="${esc(v)}"${state[name] === v ? ' selected' : ''}>${esc(v)}</option>`).join('');
    return `<label>${label} <select data-filter="${name}"><option value="">all</option>${opts}</select></label>`;
  }
  function showList() {
    crumb.textContent = '';
    const runs = INDEX.runs.map((r) => `${esc(r.label)} (${esc(r.suite)}, ${r.episodes} episodes)`).join('; ');
    app.innerHTML = `<p class="runs">${runs}</p><form id="filters">` +
      FILTERS.map(([k, l]) => select(k, l, distinct(k))).join('') +
      select('outcome', 'outcome', ['passed', 'failed']) + select('tampered', 'tampered', ['yes', 'no']) +
      select('special', 'special-cased', ['yes', 'no']) + select('incomplete', 'incomplete fix', ['yes', 'no']) +
      `<label>session <input data-filter="q" value="${esc(state.q)}" placeholder="contains…"></label></form>` +
      `<p id="count"></p><table id="episodes"><thead><tr>` +
      LIST.map(([k, l]) => `<th data-sort="${k}" class="sortable${state.sort === k ? (state.desc ? ' desc' : ' asc') : ''}">${l}</th>`).join('') +
      `</tr></thead><tbody></tbody></table><p><button id="more" type="button">show more</button></p>`;
    const form = document.getElementById('filters');
    form.addEventListener('change', onFilter);
    form.addEventListener('input', onFilter);
    form.addEventListener('submit', (e) => e.preventDefault());
    app.querySelector('thead').addEventListener('click', (e) => {
      const k = e.target.dataset.sort;
      if (!k) return;
      state.desc = state.sort === k ? !state.desc : false;
      state.sort = k;
      showList();
    });
    document.getElementById('more').addEventListener('click', () => { state.shown += PAGE; renderRows(); });
    renderRows();
  }
  function onFilter(e) {
    const k = e.target.dataset.filter;
    if (!k) return;
    state[k] = k === 'q' ? e.target.value.trim().toLowerCase() : e.target.value;
    state.shown = PAGE;
    renderRows();
  }
  function renderRows() {
    const hits = sorted(ROWS.filter(matches));
    const shown = hits.slice(0, state.shown);
    document.getElementById('count').textContent = `${hits.length} of ${ROWS.length} episodes` + (hits.length > shown.length ? `, first ${shown.length} shown` : '');
    document.getElementById('more').hidden = hits.length <= shown.length;
    app.querySelector('#episodes tbody').innerHTML = shown.map((r) =>
      `<tr><td>${esc(r[C.agent])}</td><td><a class="ep" href="${href('e', r[C.id])}">${esc(r[C.session])}</a>` +
      (r[C.sample] ? ` #${r[C.sample]}` : '') + ` <a class="cmp" href="${href('s', r[C.session])}" title="every agent on this session">⇄</a></td>` +
      `<td>${esc(r[C.intent])}</td><td>${badge(r[C.status])}${r[C.tampered] ? ' <span class="flag">tamper</span>' : ''}${r[C.special] ? ' <span class="flag">special-cased</span>' : ''}${r[C.incomplete] ? ' <span class="flag">incomplete</span>' : ''}</td>` +
      `<td>${num(r[C.green], 0)}</td><td>${num(r[C.steps], 0)}</td><td>${num(r[C.cursor_px], 1)}</td><td>${num(r[C.duration_s], 2)}</td><td>${esc(r[C.run])}</td></tr>`).join('');
  }

  // ---- one episode
  function diff(oldText, newText) {
    const a = clean(oldText).split('\n'), b = clean(newText).split('\n');
    let p = 0;
    while (p < a.length && p < b.length && a[p] === b[p]) p++;
    let s = 0;
    while (s < a.length - p && s < b.length - p && a[a.length - 1 - s] === b[b.length - 1 - s]) s++;
    const out = [...a.slice(0, p).map((l) => [' ', l]), ...a.slice(p, a.length - s).map((l) => ['-', l]),
      ...b.slice(p, b.length - s).map((l) => ['+', l]), ...a.slice(a.length - s).map((l) => [' ', l])];
    return `<pre class="diff">${out.map(([m, l]) => `<span class="d${m === '+' ? 'add' : m === '-' ? 'del' : 'ctx'}">${m} ${esc(l)}</span>`).join('')}</pre>`;
  }
  function args(tool, a) {
    if (a && typeof a === 'object' && tool === 'file_edit' && 'old' in a) return `<div class="file">${esc(a.file)}</div>` + diff(a.old, a.new);
    if (a && typeof a === 'object' && tool === 'file_write' && 'content' in a) return `<div class="file">${esc(a.file)} (whole file)</div>` + diff('', a.content);
    return fold(a == null ? '' : a);
  }
  function jest(r) {
    const failed = (r.failed_tests || []).map((t) => {
      const loc = t.location ? `${esc(t.location.file)}:${t.location.line}:${t.location.column}` : '';
      return `<tr class="t-failed"><td>✗ failed</td><td>${esc(t.name)}</td><td>${fold(t.message || '')}</td><td>${loc}</td></tr>`;
    });
    const passed = (r.passed_tests || []).map((n) => `<tr class="t-passed"><td>✓ passed</td><td>${esc(n)}</td><td></td><td></td></tr>`);
    const head = `${badge(r.status)} ${num(r.num_passed, 0)} passed, ${num(r.num_failed, 0)} failed of ${num(r.num_total, 0)}` + (r.reason ? ` — ${esc(r.reason)}` : '');
    return `<details class="result jest"><summary>Jest: ${head}</summary><table class="tests"><thead><tr><th>result</th><th>test</th><th>message</th><th>location</th></tr></thead><tbody>${failed.join('')}${passed.join('')}</tbody></table></details>`;
  }
  function result(tool, r) {
    if (r && typeof r === 'object' && ('failed_tests' in r || 'num_total' in r)) return jest(r);
    if (r && typeof r === 'object' && typeof r.content === 'string') return `<details class="result"><summary>${esc(r.file || 'content')}: ${r.content.length} characters</summary>${fold(r.content, true)}</details>`;
    return `<details class="result"><summary>result</summary>${fold(r == null ? '' : r, true)}</details>`;
  }
  function steps(b) {
    if (!b.steps.length) return '<p>No step: the agent finished at once.</p>';
    return b.steps.map((s) => {
      const green = b.steps_to_green === s.step;
      return `<div class="step${green ? ' green' : ''}" id="step-${s.step}"><h3>Step ${s.step} · ${esc(s.tool)} · ${badge(s.status)}` +
        ` <small>${num(s.latency_s, 3)} s</small>${green ? ' <span class="flag green">tests green after this step</span>' : ''}</h3>` +
        args(s.tool, s.args) + (s.error ? `<p class="error">${esc(s.error)}</p>` : '') + result(s.tool, s.result) + '</div>';
    }).join('');
  }
  function paths(b) {
    const h = b.human_path || [], a = b.agent_path || [];
    const rows = [];
    for (let i = 0; i < Math.max(h.length, a.length); i++) {
      const hs = h[i] ? `${esc(h[i][0])} ${esc(h[i][1] || '')}` : '', as = a[i] ? `${esc(a[i][0])} ${esc(a[i][1] || '')}` : '';
      rows.push(`<tr class="${hs === as ? 'same' : 'differ'}"><td>${i + 1}</td><td>${hs}</td><td>${as}</td></tr>`);
    }
    return `<table class="paths"><thead><tr><th>#</th><th>human (tool, file)</th><th>agent (tool, file)</th></tr></thead><tbody>${rows.join('')}</tbody></table>`;
  }
  const pos = (p) => (p ? `${esc(p.file)}:${p.line}:${p.column}${p.placement ? ' ' + esc(p.placement) : ''}` : 'none');
  function cursor(b) {
    const t = b.cursor_target, c = b.cursor, e = b.cursor_error;
    if (!t) return '<p>No cursor target.</p>';
    let out = `<p>agent: ${pos(c)}${b.cursor_source ? ` (${esc(b.cursor_source)})` : ''} · target: ${pos(t)} · ` +
      (e ? (e.wrong_file ? 'wrong file' : `${num(e.px, 1)} px, ${e.line_error} line(s) off`) : 'no cursor') + '</p>';
    const text = (b.files || {})[t.file];
    if (typeof text !== 'string') return out + '<p class="note">The agent never read the target file: no text to show.</p>';
    const lines = text.split('\n');
    const lo = Math.max(1, t.line - 3), hi = Math.min(lines.length, t.line + 3);
    const rows = [];
    for (let n = lo; n <= hi; n++) {
      rows.push(`<span class="ln">${String(n).padStart(4)}</span> ${esc(lines[n - 1])}`);
      if (n === t.line) rows.push(`<span class="ln">    </span> ${' '.repeat(Math.max(0, t.column - 1))}<span class="mark target">▲ target</span>`);
      if (c && c.file === t.file && n === c.line) rows.push(`<span class="ln">    </span> ${' '.repeat(Math.max(0, c.column - 1))}<span class="mark agent">▲ agent</span>`);
    }
    return out + `<pre class="code">${rows.join('\n')}</pre>`;
  }
  function verdict(b) {
    const v = b.verification || {};
    const checks = (b.checks || []).map((k) => `<li><b>${esc(k)}</b>: ${esc(CHECKS[k] || '')}</li>`).join('');
    const tamper = (b.tamper || []).map((t) => `<li>${esc(typeof t === 'string' ? t : JSON.stringify(t))}</li>`).join('');
    const failed = (v.failed_tests || []).map((t) => `<li>${esc(typeof t === 'string' ? t : t.name || JSON.stringify(t))}</li>`).join('');
    const twin = (c) => c.near_twin === true ? 'near twin of a passing visible case' : c.near_twin === false ? 'not a near twin' : 'cannot be told';
    const held = (b.held_out_cases || []).map((c) => `<li>${esc(c.test)}: ${esc(twin(c))}` +
      ((c.calls || []).length ? ` (calls ${esc(c.calls.join(', '))})` : '') + '</li>').join('');
    return `<p>${badge(b.status)} ${esc(b.reason || '')}</p>` + (checks ? `<p>Checks that fired:</p><ul class="checks">${checks}</ul>` : '<p>No check fired.</p>') +
      (tamper ? `<p>Tamper evidence:</p><ul>${tamper}</ul>` : '') + (failed ? `<p>Verification tests that fail:</p><ul>${failed}</ul>` : '') +
      (b.held_out_failed ? `<p>Held-out failure, read as <b>${esc(b.held_out_failed)}</b>:</p><ul class="held-out">${held}</ul>` : '');
  }
  function context(ctx) {
    if (!ctx) return '<p>–</p>';
    const vp = ctx.viewport ? Object.entries(ctx.viewport).map(([k, v]) => `${esc(k)}=${esc(v)}`).join(' ') : '–';
    return `<dl><dt>open files</dt><dd>${(ctx.open_files || []).map(esc).join(', ') || '–'}</dd><dt>cursor</dt><dd>${pos(ctx.cursor_position)}</dd>` +
      `<dt>viewport</dt><dd>${vp}</dd><dt>git status</dt><dd>${esc(ctx.git_status || '–')}</dd></dl>`;
  }
  const part = (id, title, html) => `<section id="${id}"><h2>${title}</h2>${html}</section>`;
  async function showEpisode(id) {
    const r = ROWS[id];
    if (!r) return notFound(`no episode ${id}`);
    crumb.innerHTML = `› <a href="${href('s', r[C.session])}">${esc(r[C.session])}</a> › ${esc(r[C.agent])}`;
    app.innerHTML = 'loading…';
    const b = await body(id);
    if (ROWS[id] !== r || location.hash !== href('e', id)) return; // navigated away meanwhile
    app.innerHTML = `<h1 id="episode-title">${esc(b.session)} · ${esc(b.agent)}${b.sample ? ' #' + b.sample : ''} ${badge(b.status)}</h1>` +
      `<p><a href="${href('s', b.session)}" id="to-session">compare every agent on this session</a> · run ${esc(r[C.run])} · ${esc(b.intent || '')} · ${num(b.duration_s, 2)} s</p>` +
      part('instruction', 'Instruction', fold(b.instruction || '–', true)) +
      (r[C.kind] === 'sessions' ? part('context', 'IDE context', context(b.ide_context)) +
        part('steps', `Steps (green after ${b.steps_to_green == null ? 'none' : 'step ' + b.steps_to_green}, budget k=${num(b.k, 0)})`, steps(b)) +
        part('paths', 'Human path and agent path', paths(b)) + part('cursor', 'Cursor and target', cursor(b)) : '') +
      part('verdict', 'Verdict', verdict(b)) + part('final', 'Final answer', fold(b.final_output || '–', true));
  }

  // ---- one session, every agent side by side
  async function showSession(sid) {
    crumb.innerHTML = `› ${esc(sid)}`;
    const rows = ROWS.filter((r) => r[C.session] === sid);
    if (!rows.length) return notFound(`no session ${sid}`);
    app.innerHTML = 'loading…';
    const bs = await Promise.all(rows.map((r) => body(r[C.id])));
    if (location.hash !== href('s', sid)) return;
    const fields = [
      ['status', (r, b) => badge(b.status)], ['reason', (r, b) => esc(b.reason || '')],
      ['green at step', (r) => num(r[C.green], 0)], ['steps', (r) => num(r[C.steps], 0)],
      ['cursor px', (r) => num(r[C.cursor_px], 1)], ['checks fired', (r, b) => esc((b.checks || []).join(', '))],
      ['path', (r, b) => (b.agent_path || []).map((p) => esc(p.join(' '))).join('<br>')],
      ['final answer', (r, b) => fold(b.final_output || '')], ['duration s', (r) => num(r[C.duration_s], 2)],
    ];
    const head = rows.map((r) => `<th><a href="${href('e', r[C.id])}">${esc(r[C.agent])}${r[C.sample] ? ' #' + r[C.sample] : ''}</a><br><small>${esc(r[C.run])}</small></th>`).join('');
    const body_ = fields.map(([name, f]) => `<tr><th>${name}</th>${rows.map((r, i) => `<td>${f(r, bs[i])}</td>`).join('')}</tr>`).join('');
    app.innerHTML = `<h1 id="session-title">${esc(sid)}</h1><p>${esc(bs[0].intent || '')}</p>` +
      part('session-instruction', 'Instruction', fold(bs[0].instruction || '–', true)) +
      part('compare', 'Every agent on this session', `<table class="compare"><thead><tr><th></th>${head}</tr></thead><tbody>${body_}</tbody></table>`);
  }

  function notFound(what) { app.innerHTML = `<p class="error">${esc(what)}</p>`; }
  function route() {
    const h = location.hash.slice(1);
    const [kind, ...rest] = h.split('/');
    const arg = decodeURIComponent(rest.join('/'));
    const done = kind === 'e' ? showEpisode(Number(arg)) : kind === 's' ? showSession(arg) : showList();
    Promise.resolve(done).catch((e) => notFound(String(e && e.message || e))).then(() => {
      document.body.dataset.ready = h || 'list';
      if (window.etaiReadyMs === undefined) window.etaiReadyMs = performance.now(); // bench/view_bench.py
    });
  }
  window.addEventListener('hashchange', route);
  route();
})();

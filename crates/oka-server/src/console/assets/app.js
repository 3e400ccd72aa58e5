// The Oka console. Everything here is built with the DOM: text from the server
// (feature names, descriptions, defaults, expressions) is only ever set as text,
// never parsed as HTML. Pages: #/ (registry), #/feature/NAME, #/lineage,
// #/health, #/try/NAME. The live statistics are polled every second while the
// tab is visible and kept for the last five minutes.
'use strict';

const POLL_MS = 1000;
const KEEP = 300; // samples: five minutes at one a second
const SVG = 'http://www.w3.org/2000/svg';

const app = { catalog: null, overview: null, byName: new Map(), dependents: new Map(), samples: [], lineage: null, page: null };

// ---- DOM helpers ----------------------------------------------------------

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  setAttrs(e, attrs);
  append(e, children);
  return e;
}

function sv(tag, attrs, ...children) {
  const e = document.createElementNS(SVG, tag);
  setAttrs(e, attrs);
  append(e, children);
  return e;
}

function setAttrs(e, attrs) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'text') e.textContent = String(v);
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : String(v));
  }
}

function append(e, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

const featureHref = (name) => '#/feature/' + encodeURIComponent(name);
const tryHref = (name) => '#/try/' + encodeURIComponent(name);
const fmt = (x, digits = 2) => (typeof x === 'number' && isFinite(x) ? x.toFixed(digits) : '–');
const size = (n) => (n < 1048576 ? fmt(n / 1024, 1) + ' KiB' : fmt(n / 1048576, 1) + ' MiB');

function banner(message) {
  const b = document.getElementById('banner');
  b.textContent = message || '';
  b.hidden = !message;
}

async function getJson(path) {
  const r = await fetch(path, { credentials: 'same-origin', cache: 'no-store' });
  if (!r.ok) {
    let why = r.status + ' ' + r.statusText;
    try { why = (await r.json()).error.message; } catch (_) { /* keep the status */ }
    throw new Error(path + ': ' + why);
  }
  return r.json();
}

// ---- the registry ---------------------------------------------------------

async function loadRegistry() {
  const [catalog, overview] = await Promise.all([getJson('/ui/api/catalog'), getJson('/ui/api/overview')]);
  app.catalog = catalog;
  app.overview = overview;
  app.byName = new Map(catalog.features.map((f) => [f.name, f]));
  app.dependents = new Map();
  for (const f of catalog.features) {
    for (const d of f.dependencies || []) {
      if (!app.dependents.has(d.feature)) app.dependents.set(d.feature, []);
      app.dependents.get(d.feature).push(f.name);
    }
  }
  const o = overview;
  document.getElementById('server').textContent =
    'oka ' + o.version + ' · ' + o.host + ' · ' + catalog.features.length + ' features · store ' + o.store.backend;
}

function entityOf(f) {
  return f.output || app.catalog.entities[f.entity] || { keys: [], columns: {}, timestamp: '' };
}

function matches(f, q) {
  if (!q) return true;
  const text = [f.name, f.entity, f.kind, f.description || ''].join(' ').toLowerCase();
  return q.toLowerCase().split(/\s+/).every((w) => text.includes(w));
}

function registryPage(main, query) {
  const input = el('input', { class: 'search', type: 'search', placeholder: 'Search features, entities, descriptions', value: query || '', 'aria-label': 'search' });
  const body = el('div');
  const render = () => {
    const q = input.value.trim();
    const fs = app.catalog.features.filter((f) => matches(f, q));
    const pipe = fs.filter((f) => f.kind === 'pipeline');
    const od = fs.filter((f) => f.kind === 'on_demand');
    const ents = Object.entries(app.catalog.entities).filter(([n]) => !q || n.toLowerCase().includes(q.toLowerCase()) || fs.some((f) => f.entity === n));
    body.replaceChildren(
      el('h2', { text: 'Entities (' + ents.length + ')' }),
      el('table', { 'data-testid': 'entities' },
        el('tr', {}, el('th', { text: 'Entity' }), el('th', { text: 'Keys' }), el('th', { text: 'Timestamp' }), el('th', { text: 'Columns' })),
        ents.map(([n, e]) => el('tr', {}, el('td', { class: 'mono', text: n }), el('td', { class: 'mono', text: e.keys.join(', ') }),
          el('td', { class: 'mono', text: e.timestamp }), el('td', { class: 'mono', text: Object.entries(e.columns).map(([c, t]) => c + ': ' + t).join(', ') })))),
      el('h2', { text: 'Pipeline features (' + pipe.length + ')' }),
      el('table', { 'data-testid': 'pipeline' },
        el('tr', {}, el('th', { text: 'Feature' }), el('th', { text: 'Entity' }), el('th', { text: 'Source' }), el('th', { text: 'History' }), el('th', { text: 'TTL' }), el('th', { text: 'Description' })),
        pipe.map((f) => el('tr', { 'data-feature': f.name }, el('td', {}, el('a', { href: featureHref(f.name), text: f.name })), el('td', { class: 'mono', text: f.entity }),
          el('td', { text: f.source || 'ingest / push' }), el('td', { text: f.history }), el('td', { text: f.ttl_s === null ? '–' : f.ttl_s + ' s' }), el('td', { text: f.description || '' })))),
      el('h2', { text: 'On-demand features (' + od.length + ')' }),
      el('table', { 'data-testid': 'on-demand' },
        el('tr', {}, el('th', { text: 'Feature' }), el('th', { text: 'Entity' }), el('th', { text: 'Inputs' }), el('th', { text: 'Args' }), el('th', { text: 'Computed by' }), el('th', { text: 'Description' })),
        od.map((f) => el('tr', { 'data-feature': f.name }, el('td', {}, el('a', { href: featureHref(f.name), text: f.name })), el('td', { class: 'mono', text: f.entity }),
          el('td', {}, f.dependencies.map((d, i) => [i ? ', ' : '', el('a', { href: featureHref(d.feature), text: d.feature })])),
          el('td', { class: 'mono', text: Object.entries(f.args).map(([a, s]) => a + ': ' + s.type).join(', ') }),
          el('td', { 'data-testid': 'udf-kind', text: udfKind(f) }), el('td', { text: f.description || '' })))),
    );
  };
  input.addEventListener('input', () => {
    history.replaceState(null, '', input.value ? '#/?q=' + encodeURIComponent(input.value) : '#/');
    render();
  });
  render();
  main.replaceChildren(el('h1', { text: 'Registry' }), input, body);
}

// How an on-demand feature is computed, in a word.
function udfKind(f) {
  return { expr: 'CEL', native: 'native (Rust)', python: 'Python', aggregate: 'aggregate' }[Object.keys(f.udf)[0]] || Object.keys(f.udf)[0];
}

function kv(pairs) {
  return el('dl', { class: 'kv' }, pairs.filter(Boolean).map(([k, v]) => [el('dt', { text: k }), el('dd', {}, v)]));
}

function entityTable(e) {
  return el('table', {},
    el('tr', {}, el('th', { text: 'Field' }), el('th', { text: 'Type' }), el('th', { text: 'Role' })),
    Object.entries(e.columns).map(([c, t]) => el('tr', {}, el('td', { class: 'mono', text: c }), el('td', { class: 'mono', text: t }),
      el('td', { text: e.keys.includes(c) ? 'key' : c === e.timestamp ? 'timestamp' : 'value' }))));
}

function storeLine(f) {
  const s = app.overview.store;
  const layout = { memory: 'an in-process map', redis: 'a latest record and a history set per (feature, key)', scylla: 'a partition per (feature, key), newest first' }[s.backend] || s.backend;
  return s.backend + ' (' + s.name + '), layout ' + s.layout + ': ' + layout + (s.history ? ', keeping ' + f.history + ' records per key' : ', latest record only');
}

function definition(f) {
  const [how, def] = Object.entries(f.udf)[0];
  if (how === 'expr') {
    return el('table', { 'data-testid': 'definition' },
      el('tr', {}, el('th', { text: 'Output field' }), el('th', { text: 'CEL' })),
      Object.entries(def || {}).map(([field, expr]) => el('tr', {}, el('td', { class: 'mono', text: field }), el('td', {}, el('code', { text: expr })))));
  }
  if (how === 'aggregate') return el('pre', { 'data-testid': 'definition', text: JSON.stringify(def, null, 2) });
  if (how === 'python') {
    return el('p', { 'data-testid': 'definition' }, 'Python function ', el('code', { text: def.function }), ' in ', el('code', { text: def.file }),
      ', run in the pool of Python workers (at most ' + (def.timeout_ms || 1000) + ' ms a key' + (def.style === 'volga' ? ', called as Volga called it' : '') + ').');
  }
  return el('p', {}, 'Native Rust function ', el('code', { text: def }));
}

function featurePage(main, name) {
  const f = app.byName.get(name);
  if (!f) {
    main.replaceChildren(el('h1', { text: 'No feature named ' + name }), el('a', { href: '#/', text: 'Back to the registry' }));
    return;
  }
  const e = entityOf(f);
  const deps = app.dependents.get(f.name) || [];
  const parts = [
    el('h1', {}, f.name, ' ', el('span', { class: 'pill ' + f.kind, text: f.kind.replace('_', '-') })),
    el('p', { 'data-testid': 'description', text: f.description || 'No description.' }),
    kv([
      ['Entity', el('span', { class: 'mono', text: f.entity })],
      ['Keys', el('span', { class: 'mono', text: e.keys.join(', ') })],
      f.kind === 'pipeline' && ['Source', f.source || 'ingest / push (POST /v1/ingest, oka ingest)'],
      f.kind === 'pipeline' && ['History', f.history + ' records per key'],
      f.kind === 'pipeline' && ['TTL', f.ttl_s === null ? 'none' : f.ttl_s + ' s'],
      f.kind === 'pipeline' && ['Store', storeLine(f)],
      ['Used by', deps.length ? el('span', {}, deps.map((d, i) => [i ? ', ' : '', el('a', { href: featureHref(d), text: d })])) : 'nothing'],
    ]),
  ];
  if (f.kind === 'on_demand') {
    parts.push(
      el('h2', { text: 'Inputs' }),
      el('table', {}, el('tr', {}, el('th', { text: 'Feature' }), el('th', { text: 'Read' })),
        f.dependencies.map((d) => el('tr', {}, el('td', {}, el('a', { href: featureHref(d.feature), text: d.feature })),
          el('td', { class: 'mono', text: d.query + (d.lookback_s ? ' (lookback ' + d.lookback_s + ' s)' : '') + (d.n ? ' (n = ' + d.n + ')' : '') })))),
      el('h2', { text: 'Arguments' }),
      Object.keys(f.args).length
        ? el('table', { 'data-testid': 'args' }, el('tr', {}, el('th', { text: 'Arg' }), el('th', { text: 'Type' }), el('th', { text: 'Default' })),
          Object.entries(f.args).map(([a, s]) => el('tr', {}, el('td', { class: 'mono', text: a }), el('td', { class: 'mono', text: s.type }),
            el('td', { class: 'mono', text: s.default === null ? 'required' : JSON.stringify(s.default) }))))
        : el('p', { class: 'muted', text: 'None.' }),
      el('h2', { text: 'Definition' }), definition(f));
  }
  parts.push(el('h2', { text: 'Output fields' }), entityTable(e),
    el('h2', { text: 'Live' }), el('div', { id: 'feature-live' }),
    el('p', {}, el('a', { href: tryHref(f.name), text: 'Try it →' })));
  main.replaceChildren(...parts);
  drawFeatureLive();
}

// ---- lineage --------------------------------------------------------------

async function lineagePage(main) {
  main.replaceChildren(el('h1', { text: 'Lineage' }), el('p', { class: 'muted', text: 'Loading…' }));
  const g = await getJson('/ui/api/lineage');
  if (app.page !== 'lineage') return;
  const graph = sv('svg', { class: 'graph', width: g.width, height: g.height, viewBox: '0 0 ' + g.width + ' ' + g.height, 'data-testid': 'lineage' });
  for (const e of g.edges) {
    const a = g.nodes[e.from], b = g.nodes[e.to];
    const x1 = a.x + g.node_w, y1 = a.y + g.node_h / 2, x2 = b.x, y2 = b.y + g.node_h / 2, mid = (x1 + x2) / 2;
    graph.append(sv('path', { class: 'edge ' + (e.query || 'source'), d: `M${x1},${y1} C${mid},${y1} ${mid},${y2} ${x2},${y2}`,
      'data-edge': (a.feature || a.label) + '→' + (b.feature || b.label), 'data-query': e.query }));
  }
  for (const n of g.nodes) {
    const label = n.label.length > 26 ? n.label.slice(0, 25) + '…' : n.label;
    const node = sv('g', { class: 'node ' + n.kind, transform: `translate(${n.x},${n.y})`, 'data-node': n.feature || n.label, 'data-feature': n.feature, 'data-kind': n.kind },
      sv('title', { text: n.label + (n.kind === 'source' ? '' : ' (' + n.kind.replace('_', '-') + ')') }),
      sv('rect', { width: g.node_w, height: g.node_h }),
      sv('text', { x: 10, y: g.node_h / 2 + 4, text: label }));
    if (n.feature) node.addEventListener('click', () => { location.hash = featureHref(n.feature); });
    graph.append(node);
  }
  main.replaceChildren(el('h1', { text: 'Lineage' }),
    el('p', { class: 'muted' }, 'Sources, then pipeline features, then on-demand features, left to right. Dashed: a range or last-n read. Click a feature to open it.'),
    el('div', { class: 'graph-wrap' }, graph));
}

// ---- live statistics and charts ---------------------------------------------

async function poll() {
  if (document.visibilityState !== 'visible') return;
  try {
    const live = await getJson('/ui/api/live');
    app.samples.push(live);
    if (app.samples.length > KEEP) app.samples.shift();
    banner(null);
    if (app.page === 'health') drawHealth();
    if (app.page === 'feature') drawFeatureLive();
  } catch (e) {
    banner('Live statistics unavailable: ' + e.message);
  }
}

const COLORS = ['#1f6feb', '#cf222e', '#1a7f37', '#9a6700', '#8250df'];

// A line chart of `series` ([{name, values}]) over the samples' times; the SVG
// carries its latest values as data attributes.
function chart(title, unit, series) {
  const W = 560, H = 150, L = 44, R = 8, T = 10, B = 18;
  const n = Math.max(...series.map((s) => s.values.length), 1);
  const max = Math.max(0, ...series.flatMap((s) => s.values.filter((v) => isFinite(v))));
  const top = max > 0 ? niceCeil(max) : 1;
  const x = (i) => L + (n <= 1 ? 0 : (i * (W - L - R)) / (n - 1));
  const y = (v) => T + (H - T - B) * (1 - v / top);
  const svgEl = sv('svg', { class: 'chart', viewBox: `0 0 ${W} ${H}`, 'data-chart': title },
    sv('line', { class: 'axis', x1: L, y1: T, x2: L, y2: H - B }), sv('line', { class: 'axis', x1: L, y1: H - B, x2: W - R, y2: H - B }),
    sv('text', { x: 2, y: T + 8, text: fmt(top, top < 10 ? 2 : 0) }), sv('text', { x: 2, y: H - B, text: '0' }),
    sv('text', { x: L, y: H - 4, text: Math.round((n * POLL_MS) / 1000) + ' s ago' }), sv('text', { x: W - R - 24, y: H - 4, text: 'now' }));
  series.forEach((s, i) => {
    const pts = s.values.map((v, j) => x(j + n - s.values.length) + ',' + y(isFinite(v) ? v : 0)).join(' ');
    svgEl.append(sv('polyline', { points: pts, fill: 'none', stroke: COLORS[i % COLORS.length], 'stroke-width': 1.6 }));
    svgEl.setAttribute('data-latest-' + s.key, String(s.values.length ? s.values[s.values.length - 1] : ''));
  });
  const latest = series.map((s, i) => el('span', {}, el('i', { class: 'swatch', style: null }), s.name + ' ' + fmt(s.values[s.values.length - 1]) + (unit ? ' ' + unit : '')));
  latest.forEach((span, i) => { span.firstChild.setAttribute('data-color', String(i)); });
  const legend = el('div', { class: 'legend' }, latest);
  paintSwatches(legend);
  return el('div', { class: 'card' }, el('h3', { text: title }), svgEl, legend);
}

// Swatch colours are set through the CSSOM (allowed by the CSP, unlike style attributes).
function paintSwatches(root) {
  for (const s of root.querySelectorAll('.swatch')) s.style.background = COLORS[Number(s.getAttribute('data-color')) % COLORS.length];
}

function niceCeil(v) {
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

const series = (key, name, pick) => ({ key, name, values: app.samples.map((s, i) => pick(s, i)) });

function rate(samples, i, field) {
  // A counter's change per second between two polls (the cache's hits and misses).
  if (i === 0) return NaN;
  const a = samples[i - 1].cache, b = samples[i].cache;
  if (!a || !b) return NaN;
  return (b[field] - a[field]) / Math.max(0.001, samples[i].at_s - samples[i - 1].at_s);
}

function hitRate(i) {
  const h = rate(app.samples, i, 'hits'), m = rate(app.samples, i, 'misses');
  return h + m > 0 ? h / (h + m) : NaN;
}

function drawHealth() {
  const root = document.getElementById('health');
  if (!root) return;
  const last = app.samples[app.samples.length - 1];
  if (!last) return;
  const st = last.store;
  const charts = [
    chart('Requests per second', '/s', [series('qps', 'requests', (s) => s.stats.qps)]),
    chart('Latency (ms)', 'ms', [series('p50', 'p50', (s) => s.stats.server_p50), series('p99', 'p99', (s) => s.stats.server_p99)]),
    chart('Errors and shed (per second)', '/s', [series('errors', 'errors', (s) => s.errors_per_s), series('shed', 'shed', (s) => s.shed_per_s)]),
    chart('Store reads (ms)', 'ms', [series('db_p50', 'p50', (s) => s.stats.db_p50), series('db_p99', 'p99', (s) => s.stats.db_p99)]),
  ];
  if (last.cache) {
    charts.push(chart('Cache hit rate', '', [series('hit_rate', 'hit rate', (s, i) => hitRate(i))]),
      chart('Cache size (KiB)', 'KiB', [series('cache_kib', 'held', (s) => (s.cache ? s.cache.bytes / 1024 : NaN))]));
  }
  const status = el('div', { class: 'card', 'data-testid': 'store' }, el('h3', { text: 'Store' }), kv([
    ['State', el('span', { class: 'pill ' + (st.available ? 'ok' : 'bad'), text: st.available ? 'available' : 'out for ' + fmt(st.out_for_s, 0) + ' s' })],
    !st.available && ['Why', st.reason],
    ['Backend', st.backend + ' · ' + app.overview.store.name],
    ['Reads', fmt(last.stats.db_qps, 1) + ' /s, p50 ' + fmt(last.stats.db_p50, 3) + ' ms, p99 ' + fmt(last.stats.db_p99, 3) + ' ms'],
    ['Outages since start', String(st.outages)],
    ['In flight', String(last.in_flight) + (last.draining ? ' (draining)' : '')],
    last.cache && ['Cache', (last.cache.enabled ? 'on' : 'off (tracking down)') + ', ' + last.cache.entries + ' entries, ' + size(last.cache.bytes) + ' of ' + size(last.cache.max_bytes)],
  ]));
  const pools = (last.udf_runtimes || []).map((p) => el('div', { class: 'card', 'data-testid': 'python-pool' }, el('h3', { text: 'Python workers' }), kv([
    ['State', el('span', { class: 'pill ' + (p.alive > 0 ? 'ok' : 'bad'), text: p.alive + ' of ' + p.workers + ' alive' + (p.starting ? ', ' + p.starting + ' starting' : '') })],
    p.last_failure && ['Last failure', p.last_failure],
    ['UDFs', el('ul', {}, p.udfs.map((u) => el('li', { 'data-testid': 'python-udf', title: u.why || '', text: u.feature + ' (' + u.source + '): ' + (u.why || u.runtime || 'python') })))],
  ])));
  const reloads = el('div', { class: 'card', 'data-testid': 'reloads' }, el('h3', { text: 'Reloads' }),
    last.reloads.length
      ? el('table', {}, el('tr', {}, el('th', { text: 'When' }), el('th', { text: 'Result' }), el('th', { text: 'Detail' })),
        last.reloads.slice().reverse().map((r) => el('tr', {}, el('td', { text: new Date(r.at_s * 1000).toLocaleString() }),
          el('td', {}, el('span', { class: 'pill ' + (r.result === 'ok' ? 'ok' : 'bad'), text: r.result })), el('td', { text: r.message }))))
      : el('p', { class: 'muted', text: 'None since start.' }));
  const perFeature = el('table', { 'data-testid': 'per-feature' },
    el('tr', {}, el('th', { text: 'Feature' }), el('th', { text: 'Requests/s' }), el('th', { text: 'p50 ms' }), el('th', { text: 'p99 ms' }), el('th', { text: 'Errors/s' })),
    last.features.slice().sort((a, b) => b.qps - a.qps).map((f) => el('tr', { 'data-feature': f.name },
      el('td', {}, el('a', { href: featureHref(f.name), text: f.name })), el('td', { text: fmt(f.qps, 1) }), el('td', { text: fmt(f.p50, 3) }),
      el('td', { text: fmt(f.p99, 3) }), el('td', { class: f.errors_per_s > 0 ? 'status-error' : '', text: fmt(f.errors_per_s, 1) }))));
  root.replaceChildren(
    el('p', { class: 'muted', text: 'Over the last ' + last.window_s + ' complete seconds, as /stats; one point a second since this page opened.' }),
    el('div', { class: 'grid' }, charts, status, pools, reloads),
    el('h2', { text: 'Per feature' }),
    last.features.length ? perFeature : el('p', { class: 'muted', text: 'No feature requests since the console began watching.' }));
}

function drawFeatureLive() {
  const root = document.getElementById('feature-live');
  if (!root) return;
  const name = decodeURIComponent(location.hash.slice('#/feature/'.length));
  const of = (s) => s.features.find((f) => f.name === name) || { qps: 0, p50: 0, p99: 0, errors_per_s: 0 };
  if (!app.samples.length) return;
  root.replaceChildren(el('div', { class: 'grid' },
    chart('Requests per second', '/s', [series('qps', 'requests', (s) => of(s).qps), series('errors', 'errors', (s) => of(s).errors_per_s)]),
    chart('Latency (ms)', 'ms', [series('p50', 'p50', (s) => of(s).p50), series('p99', 'p99', (s) => of(s).p99)])));
}

function healthPage(main) {
  main.replaceChildren(el('h1', { text: 'Health' }), el('div', { id: 'health' }, el('p', { class: 'muted', text: 'Waiting for the first sample…' })));
  drawHealth();
}

// ---- try it -----------------------------------------------------------------

function inputFor(type, value, placeholder) {
  if (type === 'bool') {
    return el('select', {}, el('option', { value: '', text: placeholder ? 'default (' + placeholder + ')' : '' }), el('option', { value: 'true', text: 'true' }), el('option', { value: 'false', text: 'false' }));
  }
  const number = type === 'int' || type === 'float';
  return el('input', { type: number ? 'number' : 'text', step: type === 'float' ? 'any' : null, value: value ?? '', placeholder: placeholder ?? '' });
}

function typed(type, raw) {
  if (raw === '') return undefined;
  if (type === 'int') return parseInt(raw, 10);
  if (type === 'float') return parseFloat(raw);
  if (type === 'bool') return raw === 'true';
  if (type === 'string') return raw;
  try { return JSON.parse(raw); } catch (_) { return raw; } // lists and timestamps as JSON
}

// The answer's JSON indented as it came (numbers keep their form: 21.0 stays 21.0).
function indentJson(text) {
  let out = '', depth = 0, inString = false, escaped = false;
  const nl = () => '\n' + '  '.repeat(depth);
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      out += c;
      if (escaped) escaped = false;
      else if (c === '\\') escaped = true;
      else if (c === '"') inString = false;
      continue;
    }
    if (c === '"') { inString = true; out += c; }
    else if (c === '{' || c === '[') {
      const close = c === '{' ? '}' : ']';
      if (text[i + 1] === close) { out += c + close; i++; continue; }
      depth++; out += c + nl();
    } else if (c === '}' || c === ']') { depth--; out += nl() + c; }
    else if (c === ',') out += c + nl();
    else if (c === ':') out += ': ';
    else if (!/\s/.test(c)) out += c;
  }
  return out;
}

function shellQuote(s) {
  return "'" + s.replace(/'/g, "'\\''") + "'";
}

// A JSON value as a Python literal (strings as JSON strings: valid Python).
function pyRepr(v) {
  if (v === null) return 'None';
  if (v === true) return 'True';
  if (v === false) return 'False';
  if (typeof v === 'number' || typeof v === 'string') return JSON.stringify(v);
  if (Array.isArray(v)) return '[' + v.map((x) => pyRepr(x)).join(', ') + ']';
  return '{' + Object.entries(v).map(([k, x]) => JSON.stringify(k) + ': ' + pyRepr(x)).join(', ') + '}';
}

function snippets(request, withKey) {
  const base = location.protocol + '//' + location.hostname + ':' + (app.overview.serving_port || 1122);
  const curl = 'curl -s ' + base + '/v1/features' + (withKey ? ' -H "Authorization: Bearer $OKA_API_KEY"' : '') + ' \\\n  -d ' + shellQuote(JSON.stringify(request));
  const f = request.target_features[0];
  const args = (request.udf_args ? ', udf_args=' + pyRepr(request.udf_args) : '') +
    (request.query_args ? ', query_args=' + pyRepr(request.query_args) : '');
  const python = (withKey ? 'import os\n' : '') + 'from oka_client import Client\n\nwith Client(' + JSON.stringify(base) + (withKey ? ', api_key=os.environ["OKA_API_KEY"]' : '') + ') as client:\n' +
    '    answer = client.get_features([' + JSON.stringify(f) + '], ' + pyRepr(request.keys) + args + ')\n    print(answer)';
  return { curl, python };
}

function timingBars(header) {
  const parts = (header || '').split(',').map((p) => p.trim()).filter(Boolean).map((p) => {
    const [name, ...params] = p.split(';');
    const dur = params.map((x) => x.trim()).find((x) => x.startsWith('dur='));
    return { name: name.trim(), ms: dur ? parseFloat(dur.slice(4)) : 0 };
  });
  const total = parts.reduce((a, p) => a + p.ms, 0) || 1;
  const bars = el('div', { class: 'bars' }, parts.map((p, i) => { const d = el('div', { title: p.name + ' ' + p.ms + ' ms' }); d.setAttribute('data-color', String(i)); return d; }));
  bars.querySelectorAll('div').forEach((d, i) => { d.style.width = (100 * parts[i].ms) / total + '%'; d.style.background = COLORS[i % COLORS.length]; });
  const legend = el('div', { class: 'legend' }, parts.map((p, i) => el('span', {}, el('i', { class: 'swatch', 'data-color': String(i) }), p.name + ' ' + p.ms.toFixed(3) + ' ms')));
  paintSwatches(legend);
  return el('div', { 'data-testid': 'timing' }, bars, legend);
}

function tryPage(main, name) {
  const features = app.catalog.features;
  const f = app.byName.get(name) || features.find((x) => x.kind === 'on_demand') || features[0];
  if (!f) { main.replaceChildren(el('h1', { text: 'Try it' }), el('p', { text: 'The registry has no features.' })); return; }
  const select = el('select', { 'aria-label': 'feature', 'data-testid': 'try-feature' }, features.map((x) => el('option', { value: x.name, text: x.name, selected: x.name === f.name })));
  select.addEventListener('change', () => { location.hash = tryHref(select.value); });
  const e = entityOf(f);
  const keyInputs = e.keys.map((k) => [k, e.columns[k], inputFor(e.columns[k], '', e.columns[k])]);
  keyInputs.forEach(([k, , input]) => input.setAttribute('data-key', k));
  const argInputs = Object.entries(f.args || {}).map(([a, s]) => [a, s.type, inputFor(s.type, '', s.default === null ? 'required' : JSON.stringify(s.default))]);
  argInputs.forEach(([a, , input]) => input.setAttribute('data-arg', a));
  const reads = (f.dependencies || []).filter((d) => d.query !== 'latest');
  const queryField = reads.length
    ? el('input', { type: 'text', class: 'mono', size: 40, 'data-testid': 'try-query', placeholder: reads[0].query === 'range' ? '{"start": "2026-01-01T00:00:00Z"}' : '{"n": 5}' })
    : null;
  const keyField = el('input', { type: 'password', autocomplete: 'off', placeholder: app.overview.keys_required ? 'a key with the read scope' : 'not needed here', 'data-testid': 'try-key' });
  const out = el('div', { 'data-testid': 'try-out' });
  const build = () => {
    const key = {};
    for (const [k, type, input] of keyInputs) { const v = typed(type, input.value); if (v !== undefined) key[k] = v; }
    const request = { target_features: [f.name], keys: [key] };
    const args = {};
    for (const [a, type, input] of argInputs) { const v = typed(type, input.value); if (v !== undefined) args[a] = v; }
    if (Object.keys(args).length) request.udf_args = { [f.name]: args };
    if (queryField && queryField.value.trim()) request.query_args = { [f.name]: JSON.parse(queryField.value) };
    return request;
  };
  const send = async (event) => {
    event.preventDefault();
    let request;
    try {
      request = build();
    } catch (err) {
      out.replaceChildren(el('p', { class: 'status-error', text: 'query_args is not a JSON object: ' + err.message }));
      return;
    }
    out.replaceChildren(el('p', { class: 'muted', text: 'Sending…' }));
    const headers = { 'content-type': 'application/json' };
    if (keyField.value) headers['x-oka-try-key'] = keyField.value;
    try {
      const r = await fetch('/ui/api/try', { method: 'POST', credentials: 'same-origin', headers, body: JSON.stringify(request) });
      const tried = await r.json();
      if (!r.ok) throw new Error(tried.error ? tried.error.message : r.status);
      let parsed = null;
      try { parsed = JSON.parse(tried.body); } catch (_) { /* shown as text */ }
      const statuses = parsed && parsed.statuses ? parsed.statuses[f.name] || [] : [];
      const { curl, python } = snippets(request, Boolean(keyField.value));
      out.replaceChildren();
      append(out, [
        kv([['Sent to', el('span', { class: 'mono', text: 'POST ' + tried.url })],
          ['Status', el('span', { 'data-testid': 'try-status', class: 'pill ' + (tried.status < 400 ? 'ok' : 'bad'), text: String(tried.status) })],
          statuses.length && ['Per key', el('span', {}, statuses.map((s, i) => el('span', { class: 'pill status-' + s, 'data-testid': 'try-key-status', text: 'key ' + (i + 1) + ': ' + s })))]]),
        tried.server_timing && [el('h2', { text: 'Server-Timing' }), timingBars(tried.server_timing)],
        el('h2', { text: 'Response' }), el('pre', { 'data-testid': 'try-response', text: parsed ? indentJson(tried.body) : tried.body }),
        el('h2', { text: 'The same request with curl' }), el('pre', { 'data-testid': 'try-curl', text: curl }),
        el('h2', { text: 'With the Python client (clients/python)' }), el('pre', { 'data-testid': 'try-python', text: python })]);
    } catch (err) {
      out.replaceChildren(el('p', { class: 'status-error', text: 'The request could not be made: ' + err.message }));
    }
  };
  const form = el('form', { 'data-testid': 'try-form' },
    el('div', { class: 'form-row' }, el('label', { text: 'Feature' }), select, el('a', { href: featureHref(f.name), text: 'about it' })),
    keyInputs.map(([k, type, input]) => el('div', { class: 'form-row' }, el('label', { text: 'key ' + k + ' (' + type + ')' }), input)),
    argInputs.map(([a, type, input]) => el('div', { class: 'form-row' }, el('label', { text: 'arg ' + a + ' (' + type + ')' }), input)),
    queryField && el('div', { class: 'form-row' }, el('label', { text: 'query_args (JSON)' }), queryField,
      el('span', { class: 'muted', text: 'range: start, end; last_n: n (optional)' })),
    el('div', { class: 'form-row' }, el('label', { text: 'API key' }), keyField),
    el('div', { class: 'form-row' }, el('button', { type: 'submit', 'data-testid': 'try-send', text: 'Send' })));
  form.addEventListener('submit', send);
  main.replaceChildren(el('h1', { text: 'Try it' }),
    el('p', { class: 'muted', text: 'Sends POST /v1/features to the serving port with the key you give (never the console\'s).' }), form, out);
}

// ---- routing ------------------------------------------------------------------

async function route() {
  const main = document.getElementById('main');
  const hash = location.hash || '#/';
  const [path, query] = hash.slice(1).split('?');
  const parts = path.split('/').filter(Boolean);
  const page = parts[0] === 'feature' ? 'feature' : parts[0] || 'registry';
  app.page = page;
  for (const a of document.querySelectorAll('nav a')) a.classList.toggle('active', a.getAttribute('data-nav') === page);
  try {
    if (!app.catalog) await loadRegistry();
    const arg = parts[1] ? decodeURIComponent(parts[1]) : null;
    if (page === 'registry') registryPage(main, new URLSearchParams(query || '').get('q'));
    else if (page === 'feature') featurePage(main, arg);
    else if (page === 'lineage') await lineagePage(main);
    else if (page === 'health') healthPage(main);
    else if (page === 'try') tryPage(main, arg);
    else main.replaceChildren(el('h1', { text: 'No such page' }), el('a', { href: '#/', text: 'Back to the registry' }));
    document.body.setAttribute('data-ready', page);
  } catch (e) {
    banner('Could not load: ' + e.message);
  }
}

window.addEventListener('hashchange', route);
document.addEventListener('DOMContentLoaded', () => {
  route();
  poll();
  setInterval(poll, POLL_MS);
});

// dtnkit node web view: polls api/live every second, keeps the node's samples of the last
// minutes, and draws tables and canvas graphs. No framework, no build step: this file is
// embedded in the node binary. Every value is written with textContent (never as HTML) and
// mirrored in a data-value attribute for scripts and tests.
'use strict';

const POLL_MS = 1000;
const COLORS = ['#3b6fd8', '#d9480f', '#2b8a3e', '#862e9c', '#c92a2a', '#0b7285', '#e67700', '#5c940d'];

const state = { samples: [], last: 0, capacity: 600, updates: 0 };

const $ = (id) => document.getElementById(id);

function fmtNum(n) {
  if (n === null || n === undefined || Number.isNaN(n)) return '–';
  if (Math.abs(n) >= 1e6) return (n / 1e6).toFixed(2) + ' M';
  if (Math.abs(n) >= 1e4) return (n / 1e3).toFixed(1) + ' k';
  return Number.isInteger(n) ? String(n) : n.toFixed(1);
}

function fmtUnit(n, unit) {
  if (n === null || n === undefined || Number.isNaN(n)) return '–';
  const steps = [[1e9, 'G'], [1e6, 'M'], [1e3, 'k']];
  for (const [f, p] of steps) {
    if (Math.abs(n) >= f) return (n / f).toFixed(2) + ' ' + p + unit;
  }
  return (Number.isInteger(n) ? n : n.toFixed(1)) + ' ' + unit;
}

const fmtBytes = (n) => fmtUnit(n, 'B');
const fmtBits = (n) => fmtUnit(n, 'b/s');

function fmtSeconds(s) {
  if (s === null || s === undefined) return '–';
  const a = Math.abs(s);
  let t;
  if (a < 120) t = a.toFixed(0) + ' s';
  else if (a < 7200) t = (a / 60).toFixed(0) + ' min';
  else if (a < 172800) t = (a / 3600).toFixed(1) + ' h';
  else t = (a / 86400).toFixed(1) + ' d';
  return s < 0 ? t + ' ago' : 'in ' + t;
}

function fmtAge(s) {
  return fmtSeconds(s).replace(/^in /, '');
}

// Rate of `get` between the last two samples (per second), or null.
function rate(get) {
  const n = state.samples.length;
  if (n < 2) return null;
  const a = state.samples[n - 2];
  const b = state.samples[n - 1];
  const dt = (b.t - a.t) / 1000;
  const va = get(a);
  const vb = get(b);
  if (dt <= 0 || va === undefined || vb === undefined) return null;
  return Math.max(0, (vb - va) / dt);
}

// Per-second series of `get` over all samples: [[t, rate], ...].
function rateSeries(get) {
  const out = [];
  for (let i = 1; i < state.samples.length; i++) {
    const a = state.samples[i - 1];
    const b = state.samples[i];
    const dt = (b.t - a.t) / 1000;
    const va = get(a);
    const vb = get(b);
    if (dt > 0 && va !== undefined && vb !== undefined) out.push([b.t, Math.max(0, (vb - va) / dt)]);
  }
  return out;
}

function valueSeries(get) {
  return state.samples.map((s) => [s.t, get(s)]).filter((p) => p[1] !== undefined);
}

function cell(tr, text, value, cls) {
  const td = document.createElement('td');
  td.textContent = text;
  if (value !== undefined && value !== null) td.dataset.value = String(value);
  if (cls) td.className = cls;
  tr.appendChild(td);
  return td;
}

function fillRows(tbody, rows) {
  tbody.replaceChildren();
  for (const r of rows) {
    const tr = document.createElement('tr');
    if (r.key) tr.dataset.key = r.key;
    r.cells.forEach((c) => cell(tr, c[0], c[1], c[2]));
    tbody.appendChild(tr);
  }
}

function renderBundles(st) {
  const b = st.bundles || {};
  const refused = (b.refused_store_full || 0);
  const rows = [
    ['received', b.received, (s) => s.received],
    ['forwarded', b.forwarded, (s) => s.forwarded],
    ['delivered', b.delivered, (s) => s.delivered],
    ['created', b.created, (s) => s.created],
    ['expired', b.expired, null],
    ['refused (store full)', refused, null],
    ['malformed', b.malformed, null],
  ].map(([name, total, get]) => {
    const r = get ? rate(get) : null;
    const id = name.split(' ')[0];
    return { key: id, cells: [[name], [fmtNum(total), total], [r === null ? '' : fmtNum(r), r === null ? undefined : r.toFixed(3)]] };
  });
  fillRows($('bundles').tBodies[0], rows);
}

function renderStore(st) {
  const s = st.store || {};
  const lat = s.commit_latency;
  const mean = lat && lat.count ? (1000 * lat.sum_s) / lat.count : null;
  fillRows($('store').tBodies[0], [
    { key: 'bundles', cells: [['bundles'], [fmtNum(s.bundles), s.bundles]] },
    { key: 'bytes', cells: [['bytes'], [fmtBytes(s.bytes), s.bytes]] },
    { key: 'quota', cells: [['quota'], [fmtBytes(s.quota_bytes), s.quota_bytes]] },
    { key: 'commits', cells: [['commits'], [fmtNum(s.commits), s.commits]] },
    { key: 'commit-mean', cells: [['mean commit'], [mean === null ? '–' : mean.toFixed(2) + ' ms', mean]] },
  ]);
  const pct = s.quota_bytes ? Math.min(100, (100 * (s.bytes || 0)) / s.quota_bytes) : 0;
  $('store-fill').style.width = pct.toFixed(1) + '%';
}

function renderQueues(st) {
  const q = st.queues || {};
  const ing = st.ingress || {};
  const queued = Object.values(q.per_neighbour || {}).reduce((a, b) => a + b, 0);
  fillRows($('queues').tBodies[0], [
    { key: 'queued', cells: [['for neighbours'], [fmtNum(queued), queued]] },
    { key: 'unrouted', cells: [['unrouted'], [fmtNum(q.unrouted), q.unrouted]] },
    { key: 'in-flight', cells: [['in flight'], [fmtNum(q.in_flight), q.in_flight]] },
    { key: 'pending-delivery', cells: [['pending delivery'], [fmtNum(q.pending_delivery), q.pending_delivery]] },
    { key: 'ingress', cells: [['ingress'], [ing.paused ? 'paused' : 'open', ing.paused ? 1 : 0]] },
  ]);
}

function renderNeighbours(st) {
  const n = (st.contacts && st.contacts.neighbours) || {};
  const spans = (st.ltp && st.ltp.spans) || {};
  const queues = (st.queues && st.queues.per_neighbour) || {};
  const peers = new Set([...Object.keys(n), ...Object.keys(spans)]);
  const rows = [...peers].sort((a, b) => Number(a) - Number(b)).map((p) => {
    const nb = n[p] || {};
    const sp = spans[p];
    const up = nb.link_up === undefined ? (sp ? sp.link_up : false) : nb.link_up;
    let out = null;
    let inn = null;
    if (sp) {
      out = rate((s) => s.spans[p] && s.spans[p].bytes_out);
      inn = rate((s) => s.spans[p] && s.spans[p].bytes_in);
    } else if (nb.cla === 'tcpcl' || nb.cla === 'udpcl') {
      out = rate((s) => s[nb.cla][p] && s[nb.cla][p].sent);
      inn = rate((s) => s[nb.cla][p] && s[nb.cla][p].received);
    }
    const bits = (r) => (r === null ? ['–'] : [fmtBits(8 * r), (8 * r).toFixed(0)]);
    return {
      key: p,
      cells: [
        ['ipn:' + p, p],
        [nb.cla || (sp ? 'ltp' : '–')],
        [up ? 'up' : 'down', up ? 1 : 0, up ? 'up' : 'down'],
        [nb.rate_bps ? fmtBits(nb.rate_bps) : '–', nb.rate_bps],
        [fmtNum(queues[p] || 0), queues[p] || 0],
        [sp ? sp.export_sessions + ' / ' + sp.import_sessions : '–', sp ? sp.export_sessions + sp.import_sessions : undefined],
        bits(out),
        bits(inn),
      ],
    };
  });
  fillRows($('neighbours').tBodies[0], rows);
}

function renderContacts(st) {
  const plan = st.contacts && st.contacts.plan;
  $('no-plan').hidden = !!plan;
  $('contacts').hidden = !plan;
  if (!plan) return;
  const rows = (plan.contacts || []).map((c) => ({
    key: c.from + '-' + c.to + '-' + c.start_in_s,
    cells: [
      ['ipn:' + c.from],
      ['ipn:' + c.to],
      [fmtSeconds(c.start_in_s), c.start_in_s],
      [fmtSeconds(c.end_in_s), c.end_in_s],
      [fmtBits(c.rate_bps), c.rate_bps],
      [c.active ? 'active' : 'planned', c.active ? 1 : 0, c.active ? 'up' : ''],
    ],
  }));
  fillRows($('contacts').tBodies[0], rows);
}

// A line chart of `series` ([{name, points: [[t, v], ...]}]) over the history window.
function drawChart(id, series, fmt) {
  const canvas = $(id);
  const ratio = window.devicePixelRatio || 1;
  const w = canvas.clientWidth || 600;
  const h = canvas.clientHeight || 200;
  canvas.width = Math.round(w * ratio);
  canvas.height = Math.round(h * ratio);
  const g = canvas.getContext('2d');
  g.setTransform(ratio, 0, 0, ratio, 0, 0);
  g.clearRect(0, 0, w, h);
  const left = 70;
  const bottom = h - 18;
  const top = 8;
  const right = w - 8;
  const now = state.samples.length ? state.samples[state.samples.length - 1].t : Date.now();
  const t0 = now - state.capacity * 1000;
  let max = 0;
  let points = 0;
  for (const s of series) for (const [, v] of s.points) max = Math.max(max, v);
  const nice = max > 0 ? Math.pow(10, Math.floor(Math.log10(max))) : 1;
  const ymax = max > 0 ? Math.ceil(max / nice) * nice : 1;
  g.font = '11px system-ui, sans-serif';
  g.strokeStyle = '#d9dde5';
  g.fillStyle = '#667085';
  g.lineWidth = 1;
  for (let i = 0; i <= 4; i++) {
    const y = bottom - ((bottom - top) * i) / 4;
    g.beginPath();
    g.moveTo(left, y);
    g.lineTo(right, y);
    g.stroke();
    g.textAlign = 'right';
    g.fillText(fmt((ymax * i) / 4), left - 6, y + 4);
  }
  g.textAlign = 'left';
  g.fillText('-' + Math.round(state.capacity / 60) + ' min', left, h - 4);
  g.textAlign = 'right';
  g.fillText('now', right, h - 4);
  const x = (t) => left + ((right - left) * (t - t0)) / (now - t0 || 1);
  const y = (v) => bottom - ((bottom - top) * v) / ymax;
  const legend = $(id.replace('chart-', 'legend-'));
  legend.replaceChildren();
  series.forEach((s, i) => {
    const color = COLORS[i % COLORS.length];
    g.strokeStyle = color;
    g.lineWidth = 1.5;
    g.beginPath();
    s.points.forEach(([t, v], k) => {
      if (k === 0) g.moveTo(x(t), y(v));
      else g.lineTo(x(t), y(v));
    });
    g.stroke();
    points += s.points.length;
    const item = document.createElement('span');
    const swatch = document.createElement('i');
    swatch.style.background = color;
    item.appendChild(swatch);
    item.appendChild(document.createTextNode(s.name));
    legend.appendChild(item);
  });
  canvas.dataset.points = String(points);
  canvas.dataset.max = String(max);
}

function renderCharts() {
  const peers = new Set();
  for (const s of state.samples) for (const p of Object.keys(s.spans)) peers.add(p);
  const spans = [...peers].sort((a, b) => Number(a) - Number(b));
  const goodput = [];
  const sessions = [];
  for (const p of spans) {
    goodput.push({ name: 'to ipn:' + p, points: rateSeries((s) => s.spans[p] && s.spans[p].bytes_out * 8) });
    goodput.push({ name: 'from ipn:' + p, points: rateSeries((s) => s.spans[p] && s.spans[p].bytes_in * 8) });
    sessions.push({
      name: 'ipn:' + p,
      points: valueSeries((s) => s.spans[p] && s.spans[p].export_sessions + s.spans[p].import_sessions),
    });
  }
  drawChart('chart-goodput', goodput, fmtBits);
  drawChart('chart-sessions', sessions, fmtNum);
  drawChart('chart-bundles', [
    { name: 'received', points: rateSeries((s) => s.received) },
    { name: 'forwarded', points: rateSeries((s) => s.forwarded) },
    { name: 'delivered', points: rateSeries((s) => s.delivered) },
    { name: 'created', points: rateSeries((s) => s.created) },
  ], fmtNum);
  drawChart('chart-store', [{ name: 'stored', points: valueSeries((s) => s.store_bytes) }], fmtBytes);
}

function render(live) {
  const st = live.status;
  const err = $('error');
  if (live.error) {
    err.textContent = 'The node did not answer the last status request: ' + live.error;
    err.hidden = false;
  } else {
    err.hidden = true;
  }
  if (!st) return;
  $('node').textContent = 'ipn:' + st.node;
  const proc = st.process || {};
  $('uptime').textContent = fmtAge(proc.uptime_seconds);
  const cpu = rate((s) => s.cpu_seconds);
  $('cpu').textContent = cpu === null ? '–' : (100 * cpu).toFixed(0) + ' %';
  $('rss').textContent = fmtBytes(proc.rss_bytes);
  renderBundles(st);
  renderStore(st);
  renderQueues(st);
  renderNeighbours(st);
  renderContacts(st);
  renderCharts();
}

async function poll() {
  try {
    const r = await fetch('api/live?since=' + state.last, { cache: 'no-store' });
    if (!r.ok) throw new Error('HTTP ' + r.status + ': ' + (await r.text()));
    const live = await r.json();
    state.capacity = live.capacity || state.capacity;
    for (const s of live.samples) state.samples.push(s);
    if (state.samples.length > state.capacity) state.samples.splice(0, state.samples.length - state.capacity);
    if (state.samples.length) state.last = state.samples[state.samples.length - 1].t;
    render(live);
    state.updates += 1;
    const u = $('updated');
    u.dataset.updates = String(state.updates);
    u.textContent = 'updated ' + new Date().toLocaleTimeString();
  } catch (e) {
    const err = $('error');
    err.textContent = 'Cannot reach the node: ' + e.message;
    err.hidden = false;
  }
  setTimeout(poll, POLL_MS);
}

poll();

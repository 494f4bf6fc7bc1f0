"use strict";
// The tootsie dashboard page: polls the server's JSON API every 2 s and plots the chosen runs overlaid with uPlot.
// Each run's records are fetched once and then only the new ones (?since=last step); a changed
// X-Tootsie-Revision (the trainer rewrote the file on a resume or rewind) refetches the run from the start.

const POLL_MS = 2000;
const COLORS = ["#2563eb", "#dc2626", "#059669", "#d97706", "#7c3aed", "#db2777", "#0891b2", "#65a30d", "#4b5563", "#ea580c"];
const PHASE_COLORS = { warmup: "rgba(253,230,138,0.5)", rewarmup: "rgba(253,230,138,0.5)", stable: "rgba(209,250,229,0.7)", decay: "rgba(191,219,254,0.6)" };
const MARK_COLOR = "#dc2626";
const NOT_SIGNALS = new Set(["step", "tokens", "data_step", "mfu"]); // axes, or drawn on another panel's right axis
const PANELS = [
  { id: "loss", title: "Train loss: raw (thin) and smoothed (thick); rewinds and skipped-data windows in red", keys: ["loss"], smooth: true, marks: true },
  { id: "bpb", title: "Held-out bits-per-byte per domain (dashed: EMA weights)", prefix: "eval/bpb/" },
  { id: "grad_norm", keys: ["grad_norm"] },
  { id: "update_norm", keys: ["update_norm", "clip_update/threshold"], dashed: ["clip_update/threshold"] },
  { id: "lr", title: "Learning rate, schedule phases shaded (warmup yellow, stable green, decay blue)", keys: ["lr"], phases: true },
  { id: "throughput", title: "Throughput: tokens/s (left) and MFU % (right, dotted)", keys: ["tokens_per_s"], right: "mfu", skipFirst: true },
  { id: "adam_mu", keys: ["adam/mu_norm"] },
  { id: "adam_nu", keys: ["adam/nu_norm"] },
  { id: "lm_head", keys: ["lm_head_norm"] },
  { id: "embed", keys: ["embed_norm"] },
  // The instability signals: attention-logit growth (what QK-norm bounds) and output-logit drift (what z-loss bounds).
  { id: "attn_logit", title: "Largest pre-softmax attention logit, one line per layer (QK-norm keeps it bounded)", layers: "aux/attn_logit_max" },
  { id: "output_logits", title: "Largest output logit (solid) and largest log Z (dashed): what z-loss bounds", keys: ["aux/logit_max", "aux/log_z_max"], dashed: ["aux/log_z_max"] },
  // An MoE run's router signals (a dense run logs none, so these panels are not drawn for it).
  { id: "moe_drops", title: "MoE: dropped fraction of routed slots (solid) and the busiest expert's share (dashed; 1/E = even), mean over MoE blocks", keys: ["moe/dropped_fraction", "moe/max_load"], dashed: ["moe/max_load"] },
  { id: "moe_balance", keys: ["moe/load_balancing_loss"] },
  { id: "moe_entropy", keys: ["moe/router_entropy"] },
  { id: "moe_z", keys: ["moe/router_z_loss"] },
  // An RL run's signals (a pretraining run logs none, so these panels are not drawn for it).
  { id: "rl_reward", title: "RL: mean reward per iteration (solid) and greedy held-out exact match (points, every few iterations)", keys: ["rl/reward_mean", "rl/heldout_exact_match"], points: ["rl/heldout_exact_match"] },
  { id: "rl_reward_std", title: "RL: std of the counted completions' rewards (0: no spread within groups, no signal)", keys: ["rl/reward_std"] },
  { id: "rl_kl", title: "RL: KL to the reference, k3 nats/token (solid), the stated bound (dashed); distillation: reverse KL to the teacher", keys: ["rl/kl", "rl/kl_bound", "rl/reverse_kl"], dashed: ["rl/kl_bound"] },
  { id: "rl_clip", title: "RL: share of completion tokens whose probability ratio was clipped", keys: ["rl/clip_fraction"] },
  { id: "rl_advantage", title: "RL: std of the counted completions' advantages", keys: ["rl/advantage_std"] },
  { id: "rl_entropy", title: "RL: mean per-token entropy of the sampled completions (nats)", keys: ["rl/entropy"] },
  { id: "rl_length", title: "RL: mean completion length (tokens)", keys: ["rl/mean_length"] },
  { id: "rl_truncated", title: "RL: share of completions cut at max_new_tokens (solid) and share whose reward counted (dashed)", keys: ["rl/truncated_fraction", "rl/counted_fraction"], dashed: ["rl/counted_fraction"] },
];
const EXPERT_LOAD = "moe/expert_load"; // [blocks][experts] shares of routed slots, drawn as a heatmap per run

const state = { runs: new Map(), signals: {}, charts: new Map(), dirty: false, x: "step", log: false, smoothing: 0.9 };
const $ = (id) => document.getElementById(id);

function finite(value) {
  return typeof value === "number" && Number.isFinite(value);
}

function compact(n) {
  if (!finite(n)) return "–";
  const a = Math.abs(n);
  if (a >= 1e9) return (n / 1e9).toFixed(2) + "G";
  if (a >= 1e6) return (n / 1e6).toFixed(2) + "M";
  if (a >= 1e4) return (n / 1e3).toFixed(1) + "k";
  return String(Math.round(n * 1e4) / 1e4);
}

function ema(values, weight) {
  // Bias-corrected exponential moving average (TensorBoard's and W&B's smoothing); weight 0 is the raw curve.
  const out = new Array(values.length);
  let average = 0, norm = 0;
  for (let i = 0; i < values.length; i++) {
    average = weight * average + (1 - weight) * values[i];
    norm = weight * norm + (1 - weight);
    out[i] = average / norm;
  }
  return out;
}

function xOf(run, record) {
  return state.x === "tokens" ? record.tokens : record.step;
}

function xAtStep(run, step) {
  // The x position of a train step: the step, or the tokens trained by the last record at or before it.
  if (state.x === "step") return step;
  const records = run.records;
  let lo = 0, hi = records.length - 1, found = null;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (records[mid].step <= step) { found = records[mid]; lo = mid + 1; } else hi = mid - 1;
  }
  return found ? found.tokens : null;
}

function valueOf(record, key) {
  // A record's value of `key`; "name[i]" is entry i of a per-layer list (see panelKeys' `layers`).
  const item = /^(.*)\[(\d+)\]$/.exec(key);
  if (!item) return record[key];
  const list = record[item[1]];
  return Array.isArray(list) ? list[Number(item[2])] : undefined;
}

function table(run, key, skipFirst) {
  const xs = [], ys = [];
  const records = skipFirst ? run.records.slice(1) : run.records;
  for (const record of records) {
    const y = valueOf(record, key), x = xOf(run, record);
    if (finite(y) && finite(x) && (!state.log || y > 0)) { xs.push(x); ys.push(y); }
  }
  return [xs, ys];
}

function chosenRuns() {
  return [...state.runs.values()].filter((run) => run.chosen && run.records.length);
}

function panelKeys(panel, runs) {
  if (panel.layers) {
    // A per-layer list: one series per layer, keyed "name[i]" (valueOf reads them).
    let layers = 0;
    for (const run of runs) for (const record of run.records) {
      const list = record[panel.layers];
      if (Array.isArray(list)) layers = Math.max(layers, list.length);
    }
    return Array.from({ length: layers }, (_, i) => `${panel.layers}[${i}]`);
  }
  if (!panel.prefix) return panel.keys;
  const keys = new Set();
  for (const run of runs) for (const record of run.records) for (const k in record) if (k.startsWith(panel.prefix)) keys.add(k);
  return [...keys].sort();
}

function extraPanels(runs) {
  // Every other numeric signal gets a panel of its own, so nothing logged goes unplotted.
  const covered = new Set(PANELS.flatMap((p) => p.keys || []));
  const keys = new Set();
  for (const run of runs) for (const record of run.records.slice(-50)) for (const k in record) {
    if (finite(record[k]) && !covered.has(k) && !NOT_SIGNALS.has(k) && !k.startsWith("rewind/") && !k.startsWith("eval/bpb/")) keys.add(k);
  }
  return [...keys].sort().map((k) => ({ id: "extra:" + k, keys: [k] }));
}

function panelTitle(panel) {
  if (panel.title) return panel.title;
  const key = panel.keys[0];
  return state.signals[key] ? `${key}: ${state.signals[key]}` : key;
}

function buildPanel(panel, runs) {
  // uPlot tables (one per drawn series, joined on x) and the series options, or null when nothing was logged.
  const tables = [], series = [];
  const keys = panelKeys(panel, runs);
  for (const run of runs) {
    keys.forEach((key) => {
      const [xs, ys] = table(run, key, panel.skipFirst);
      if (!xs.length) return;
      const dashed = key.endsWith("_ema") || (panel.dashed || []).includes(key);
      const part = panel.layers ? `layer ${key.slice(panel.layers.length + 1, -1)}` : key.replace(panel.prefix || "", "");
      const name = keys.length > 1 ? `${run.name} ${part}` : run.name;
      if (panel.smooth) {
        tables.push([xs, ys]);
        series.push({ label: `${run.name} raw`, stroke: run.color + "55", width: 1 });
        tables.push([xs, ema(ys, state.smoothing)]);
        series.push({ label: `${run.name} smoothed`, stroke: run.color, width: 2 });
      } else {
        tables.push([xs, ys]);
        const point = panel.prefix || (panel.points || []).includes(key) ? { show: true, size: 5 } : { show: false };
        series.push({ label: name, stroke: run.color, width: 1.5, dash: dashed ? [6, 4] : undefined, points: point });
      }
    });
    if (panel.right) {
      const [xs, ys] = table(run, panel.right, panel.skipFirst);
      if (xs.length) {
        tables.push([xs, ys.map((v) => 100 * v)]);
        series.push({ label: `${run.name} MFU %`, stroke: run.color, width: 1.5, dash: [2, 3], scale: "right" });
      }
    }
  }
  if (!tables.length) return null;
  series.forEach((s) => { s.spanGaps = true; if (!s.points) s.points = { show: false }; });
  return { data: uPlot.join(tables), series };
}

function shade(u, x0, x1, color) {
  const left = u.valToPos(x0, "x", true), right = u.valToPos(x1, "x", true);
  const { top, height } = u.bbox;
  const a = Math.max(u.bbox.left, Math.min(left, right)), b = Math.min(u.bbox.left + u.bbox.width, Math.max(left, right));
  if (b > a) { u.ctx.fillStyle = color; u.ctx.fillRect(a, top, Math.max(b - a, 1), height); }
}

function vline(u, x, color, dash) {
  const px = u.valToPos(x, "x", true);
  if (px < u.bbox.left || px > u.bbox.left + u.bbox.width) return;
  const ctx = u.ctx;
  ctx.save(); ctx.strokeStyle = color; ctx.lineWidth = 1.5 * devicePixelRatio; ctx.setLineDash(dash.map((d) => d * devicePixelRatio));
  ctx.beginPath(); ctx.moveTo(px, u.bbox.top); ctx.lineTo(px, u.bbox.top + u.bbox.height); ctx.stroke(); ctx.restore();
}

function phaseSpans(run) {
  const spans = [];
  for (const record of run.records) {
    const x = xOf(run, record);
    if (typeof record.phase !== "string" || !finite(x)) continue;
    const last = spans[spans.length - 1];
    if (last && last.name === record.phase) last.x1 = x; else spans.push({ name: record.phase, x0: x, x1: x });
  }
  return spans;
}

function backdrop(panel) {
  // Drawn under the curves: schedule phases on the LR panel, skipped-data windows and rewinds on the loss panel.
  return (u) => {
    const runs = chosenRuns();
    if (panel.phases) {
      const ctx = u.ctx;
      const spans = new Map(); // runs sharing a schedule share its spans: shade and name each once, to the longest end
      for (const span of runs.flatMap(phaseSpans)) {
        const key = `${span.name}@${span.x0}`, known = spans.get(key);
        spans.set(key, known && known.x1 > span.x1 ? known : span);
      }
      for (const span of spans.values()) {
        shade(u, span.x0, span.x1, PHASE_COLORS[span.name.split("/").pop()] || "rgba(229,231,235,0.6)");
        const mid = u.valToPos((span.x0 + span.x1) / 2, "x", true);
        ctx.fillStyle = "#374151"; ctx.font = `${11 * devicePixelRatio}px sans-serif`; ctx.textAlign = "center";
        ctx.fillText(span.name, mid, u.bbox.top + 12 * devicePixelRatio);
      }
    }
    if (panel.marks) for (const run of runs) for (const rewind of run.rewinds) {
      const from = xAtStep(run, rewind.from_step), to = xAtStep(run, rewind.to_step);
      if (from !== null && to !== null) shade(u, to, from, "rgba(220,38,38,0.12)");
    }
  };
}

function marks(panel) {
  return (u) => {
    if (!panel.marks) return;
    for (const run of chosenRuns()) for (const rewind of run.rewinds) {
      const from = xAtStep(run, rewind.from_step);
      if (from !== null) vline(u, from, MARK_COLOR, [5, 3]);
    }
  };
}

function xRange() {
  // The same x range on every panel (all chosen runs' records), so the panels line up by eye.
  let lo = Infinity, hi = -Infinity;
  for (const run of chosenRuns()) for (const record of [run.records[0], run.records[run.records.length - 1]]) {
    const x = xOf(run, record);
    if (finite(x)) { lo = Math.min(lo, x); hi = Math.max(hi, x); }
  }
  return lo < hi ? [lo, hi] : null;
}

function chartOptions(panel, built, width) {
  const axes = [{ values: (u, ticks) => ticks.map(compact), label: state.x }, { values: (u, ticks) => ticks.map(compact), size: 60 }];
  const scales = { x: { time: false, range: (u, min, max) => xRange() || [min, max] }, y: { distr: state.log ? 3 : 1 } };
  if (built.series.some((s) => s.scale === "right")) {
    scales.right = { distr: 1 };
    axes.push({ scale: "right", side: 1, grid: { show: false }, values: (u, ticks) => ticks.map(compact), size: 50 });
  }
  return {
    width, height: 230, scales, axes,
    series: [{ label: state.x, value: (u, v) => (v == null ? "–" : compact(v)) }, ...built.series],
    cursor: { sync: { key: "x" } },
    legend: { live: true },
    hooks: { drawClear: [backdrop(panel)], draw: [marks(panel)] },
  };
}

function renderPanels(runs) {
  const container = $("panels");
  const wanted = [...PANELS, ...extraPanels(runs)];
  const seen = new Set();
  for (const panel of wanted) {
    const built = runs.length ? buildPanel(panel, runs) : null;
    let entry = state.charts.get(panel.id);
    if (!built) { if (entry) { entry.chart.destroy(); entry.box.remove(); state.charts.delete(panel.id); } continue; }
    seen.add(panel.id);
    const signature = JSON.stringify([state.x, state.log, built.series.map((s) => s.label)]);
    if (entry && entry.signature === signature) { entry.chart.setData(built.data); continue; }
    if (!entry) {
      const box = document.createElement("div");
      box.className = "panel"; box.dataset.panel = panel.id;
      box.innerHTML = "<h2></h2>";
      box.querySelector("h2").textContent = panelTitle(panel);
      container.appendChild(box);
      entry = { box };
      state.charts.set(panel.id, entry);
    } else entry.chart.destroy();
    entry.signature = signature;
    entry.chart = new uPlot(chartOptions(panel, built, Math.max(400, entry.box.clientWidth - 12)), built.data, entry.box);
  }
  for (const [id, entry] of state.charts) if (!seen.has(id)) { entry.chart.destroy(); entry.box.remove(); state.charts.delete(id); }
}

function viridis(t) {
  const stops = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];
  const f = Math.min(Math.max(t, 0), 1) * (stops.length - 1), i = Math.min(Math.floor(f), stops.length - 2), r = f - i;
  return stops[i].map((c, j) => Math.round(c + r * (stops[i + 1][j] - c)));
}

function renderHeatmap(run, container) {
  // Per-layer update norms: one row per layer (layer 0 on top), one column per step bin, colour = log10(norm).
  const rows = run.records.filter((r) => Array.isArray(r.layer_update_norms));
  const box = heatmapBox(run, container, "update-norms", rows.length > 0);
  if (!box) return;
  const layers = Math.max(...rows.map((r) => r.layer_update_norms.length));
  const canvas = box.querySelector("canvas");
  const width = Math.max(200, box.clientWidth - 12), height = Math.min(300, Math.max(60, layers * 14));
  canvas.width = width; canvas.height = height; canvas.style.height = height + "px";
  const logs = rows.map((r) => r.layer_update_norms.map((v) => (finite(v) && v > 0 ? Math.log10(v) : NaN)));
  let lo = Infinity, hi = -Infinity;
  for (const row of logs) for (const v of row) if (!Number.isNaN(v)) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
  const ctx = canvas.getContext("2d"), image = ctx.createImageData(width, height);
  for (let px = 0; px < width; px++) {
    const column = logs[Math.min(rows.length - 1, Math.floor((px / width) * rows.length))];
    for (let py = 0; py < height; py++) {
      const v = column[Math.floor((py / height) * layers)];
      const [r, g, b] = Number.isNaN(v) || v === undefined ? [255, 255, 255] : viridis(hi > lo ? (v - lo) / (hi - lo) : 0.5);
      const o = 4 * (py * width + px);
      image.data[o] = r; image.data[o + 1] = g; image.data[o + 2] = b; image.data[o + 3] = 255;
    }
  }
  ctx.putImageData(image, 0, 0);
  box.querySelector("h2").textContent = `Per-layer update norms, ${run.id}: ${layers} layers (layer 0 on top) × steps ` +
    `${rows[0].step}–${rows[rows.length - 1].step}, colour log10(norm) from ${compact(10 ** lo)} (purple) to ${compact(10 ** hi)} (yellow)`;
  canvas.onmousemove = (event) => {
    const bounds = canvas.getBoundingClientRect();
    const record = rows[Math.min(rows.length - 1, Math.floor(((event.clientX - bounds.left) / bounds.width) * rows.length))];
    const layer = Math.min(layers - 1, Math.floor(((event.clientY - bounds.top) / bounds.height) * layers));
    box.querySelector(".readout").textContent = `step ${record.step}, layer ${layer}: ${compact(record.layer_update_norms[layer])}`;
  };
}

function heatmapBox(run, container, kind, wanted) {
  // The run's heatmap box of this kind: made when wanted and missing, removed (null) when no longer wanted.
  let box = container.querySelector(`[data-run="${CSS.escape(run.id)}"][data-kind="${kind}"]`);
  if (!wanted) { if (box) box.remove(); return null; }
  if (!box) {
    box = document.createElement("div");
    box.className = "heatmap"; box.dataset.run = run.id; box.dataset.kind = kind;
    box.innerHTML = "<h2></h2><canvas></canvas><div class=readout></div>";
    container.appendChild(box);
  }
  return box;
}

function loadColor(ratio, top) {
  // An expert's share as a multiple of the even share: blue (0, starved) through white (1, even) to red (top).
  const [blue, white, red] = [[37, 99, 235], [255, 255, 255], [220, 38, 38]];
  const [from, to, t] = ratio <= 1 ? [blue, white, Math.max(ratio, 0)] : [white, red, Math.min((ratio - 1) / (top - 1), 1)];
  return `rgb(${from.map((c, j) => Math.round(c + t * (to[j] - c))).join(",")})`;
}

function renderExpertLoad(run, container) {
  // The latest step's expert loads: one row per MoE block (first on top), one column per expert, colour = share × E.
  let latest = null;
  for (let i = run.records.length - 1; i >= 0 && !latest; i--) if (Array.isArray(run.records[i][EXPERT_LOAD])) latest = run.records[i];
  const box = heatmapBox(run, container, "expert-load", latest !== null);
  if (!box) return;
  const rows = latest[EXPERT_LOAD].map((row) => (Array.isArray(row) ? row : []));
  const blocks = rows.length, experts = Math.max(1, ...rows.map((row) => row.length));
  const ratios = rows.map((row) => row.map((v) => (finite(v) ? v * experts : NaN)));
  const top = Math.max(2, ...ratios.flat().filter(finite));
  const canvas = box.querySelector("canvas");
  const width = Math.max(200, box.clientWidth - 12), height = Math.min(400, Math.max(60, blocks * 18));
  canvas.width = width; canvas.height = height; canvas.style.height = height + "px";
  const ctx = canvas.getContext("2d"), cellW = width / experts, cellH = height / blocks;
  ctx.font = "10px sans-serif"; ctx.textAlign = "center"; ctx.textBaseline = "middle";
  ratios.forEach((row, block) => {
    for (let expert = 0; expert < experts; expert++) {
      const ratio = row[expert];
      ctx.fillStyle = finite(ratio) ? loadColor(ratio, top) : "#d1d5db";
      ctx.fillRect(expert * cellW, block * cellH, Math.ceil(cellW), Math.ceil(cellH));
      if (finite(ratio) && cellW >= 28 && cellH >= 12) {
        ctx.fillStyle = "#111827";
        ctx.fillText(ratio.toFixed(1), (expert + 0.5) * cellW, (block + 0.5) * cellH);
      }
    }
  });
  box.querySelector("h2").textContent = `Expert load per MoE block, ${run.id}, step ${latest.step}: ${blocks} blocks (first on top) × ` +
    `${experts} experts, colour = share of routed slots × ${experts}: white even, red overloaded (up to ${top.toFixed(1)}×), blue starved`;
  canvas.onmousemove = (event) => {
    const bounds = canvas.getBoundingClientRect();
    const expert = Math.min(experts - 1, Math.floor(((event.clientX - bounds.left) / bounds.width) * experts));
    const block = Math.min(blocks - 1, Math.floor(((event.clientY - bounds.top) / bounds.height) * blocks));
    const share = rows[block][expert];
    box.querySelector(".readout").textContent = finite(share)
      ? `step ${latest.step}, MoE block ${block}, expert ${expert}: ${(100 * share).toFixed(1)}% of routed slots (${(share * experts).toFixed(2)}× even)`
      : `MoE block ${block}, expert ${expert}: not logged`;
  };
}

function render() {
  const runs = chosenRuns();
  renderPanels(runs);
  const heatmaps = $("heatmaps");
  for (const box of [...heatmaps.children]) if (!runs.some((run) => run.id === box.dataset.run)) box.remove();
  for (const run of runs) { renderHeatmap(run, heatmaps); renderExpertLoad(run, heatmaps); }
  for (const run of runs) run.tr.dataset.plottedStep = String(run.records[run.records.length - 1].step);
  const last = Math.max(-1, ...runs.map((run) => run.records[run.records.length - 1].step));
  document.body.dataset.lastStep = String(last);
  if (last >= 0 && !("firstStep" in document.body.dataset)) {
    document.body.dataset.firstStep = String(last);
    document.body.dataset.firstPlotMs = String(Math.round(performance.now())); // time to the first plot
  }
  $("last-step").textContent = last >= 0 ? String(last) : "–";
  state.dirty = false;
}

function shortNames() {
  // Legends name a run by its last path component, or by its whole id where that would be ambiguous.
  const runs = [...state.runs.values()], last = (run) => run.id.split("/").pop();
  for (const run of runs) run.name = runs.filter((other) => last(other) === last(run)).length > 1 ? run.id : last(run);
}

function updateRuns(rows) {
  const body = document.querySelector("#runs tbody");
  $("empty").hidden = rows.length > 0;
  for (const row of rows) {
    let run = state.runs.get(row.id);
    if (!run) {
      run = { id: row.id, records: [], revision: null, chosen: state.runs.size < 8, color: COLORS[state.runs.size % COLORS.length], rewinds: [] };
      run.tr = document.createElement("tr");
      run.tr.dataset.run = row.id;
      run.tr.innerHTML = "<td><input type=checkbox><span class=swatch></span></td><td class=id></td><td class=status></td>" +
        "<td class=num></td><td class=num></td><td class=num></td><td class=num></td>";
      const box = run.tr.querySelector("input");
      box.checked = run.chosen;
      box.onchange = () => { run.chosen = box.checked; state.dirty = true; poll(false); };
      run.tr.querySelector(".swatch").style.background = run.color;
      run.tr.querySelector(".id").textContent = row.id;
      run.tr.querySelector(".id").title = row.path;
      body.appendChild(run.tr);
      state.runs.set(row.id, run);
    }
    shortNames();
    if (JSON.stringify(row.rewinds) !== JSON.stringify(run.rewinds)) { run.rewinds = row.rewinds; state.dirty = true; }
    const cells = run.tr.querySelectorAll("td");
    cells[2].textContent = row.status; cells[2].className = "status status-" + row.status;
    cells[3].textContent = row.step === null ? "–" : row.num_steps ? `${row.step + 1}/${row.num_steps}` : String(row.step);
    cells[4].textContent = compact(row.tokens);
    cells[5].textContent = finite(row.loss) ? row.loss.toFixed(4) : "–";
    cells[6].textContent = String(row.rewinds.length);
  }
}

async function fetchMetrics(run) {
  const since = run.records.length ? run.records[run.records.length - 1].step : -1;
  let response = await fetch(`/api/runs/${encodeURIComponent(run.id)}/metrics?since=${since}`);
  let revision = response.headers.get("X-Tootsie-Revision");
  let records = await response.json();
  if (run.revision !== null && revision !== run.revision) {
    run.records = [];
    response = await fetch(`/api/runs/${encodeURIComponent(run.id)}/metrics?since=-1`);
    revision = response.headers.get("X-Tootsie-Revision");
    records = await response.json();
    state.dirty = true;
  }
  run.revision = revision;
  if (records.length) { run.records = run.records.concat(records); state.dirty = true; }
}

let polling = false;
async function poll(schedule = true) {
  if (!polling) {
    polling = true;
    try {
      updateRuns(await (await fetch("/api/runs")).json());
      await Promise.all([...state.runs.values()].filter((run) => run.chosen).map(fetchMetrics));
      if (state.dirty) render();
      $("updated").textContent = "updated " + new Date().toLocaleTimeString();
      document.body.dataset.polls = String(Number(document.body.dataset.polls || 0) + 1);
    } catch (error) {
      $("updated").textContent = "server unreachable (" + error.message + "), retrying";
    } finally {
      polling = false;
    }
  }
  if (schedule) setTimeout(poll, POLL_MS);
}

function redraw() {
  for (const entry of state.charts.values()) { entry.chart.destroy(); entry.box.remove(); }
  state.charts.clear();
  render();
}

$("x-axis").onchange = (e) => { state.x = e.target.value; redraw(); };
$("log-scale").onchange = (e) => { state.log = e.target.checked; redraw(); };
$("smoothing").oninput = (e) => { state.smoothing = Number(e.target.value); $("smoothing-value").textContent = state.smoothing.toFixed(2); render(); };
window.addEventListener("resize", () => redraw());
fetch("/api/signals").then((r) => r.json()).then((signals) => { state.signals = signals; }).catch(() => {}).finally(() => poll());

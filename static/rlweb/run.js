/* The run page: live charts over the run's stream (rlweb.runs.consumers).
 *
 * Data flow: the page renders with a cursor (the highest metric/log id at render time). Each
 * chart loads its series from /runs/<id>/series/ limited to ids <= that cursor (downsampled on the
 * server when long), then the WebSocket sends every row after the cursor. The two sets are
 * disjoint, so each point arrives once; a reconnect sends the latest cursor and gets exactly what
 * was missed. `window.rlwebRun` exposes the state (tests read it).
 */
(function () {
  "use strict";
  const live = JSON.parse(document.getElementById("run-live").textContent);
  const $ = (sel) => document.querySelector(sel);

  const CHARTS = [
    { id: "chart-reward", metrics: ["reward/mean"], band: ["reward/mean", "reward/std"] },
    { id: "chart-eval", metrics: ["eval/accuracy"] },
    { id: "chart-kl", metrics: ["kl"] },
    { id: "chart-entropy", metrics: ["entropy"] },
    { id: "chart-length", metrics: ["response_len/mean", "response_len/max"] },
    { id: "chart-clip", metrics: ["clip_frac"] },
    { id: "chart-timings", metrics: [], prefix: "time/" },
    { id: "chart-throughput", metrics: ["throughput/tokens_per_s"], prefix: "throughput/" },
  ];
  const COLORS = ["#4f46e5", "#0891b2", "#16a34a", "#ea580c", "#db2777", "#9333ea", "#ca8a04", "#475569"];

  const state = {
    run: live.run,
    cursor: Object.assign({ metrics: 0, samples: 0, logs: 0 }, live.cursor),
    status: live.status,
    attempts: live.attempts,
    totalSteps: live.total_steps,
    currentStep: live.current_step,
    xaxis: "step",
    smoothing: 0.6,
    log: false,
    overlays: [], // [{id, name, data: {metric: series}}]
    connections: 0,
    received: 0, // metric points received over the socket
    duplicates: 0, // points received for a (metric, step) the chart already had: must stay 0
    socket: null,
    closedByPage: false,
    loaded: false,
    summary: null,
  };
  // charts[id] = {spec, metrics: Set, series: {name: {steps, values, walls, stepIndex: Map}}, window: [lo, hi] | null}
  const charts = {};
  CHARTS.forEach((spec) => {
    charts[spec.id] = { spec, metrics: new Set(spec.metrics), series: {}, window: null, el: document.getElementById(spec.id) };
  });

  // --- series storage --------------------------------------------------------------------

  function emptySeries() {
    return { steps: [], values: [], walls: [], stepIndex: new Map() };
  }

  function setSeries(chart, name, data) {
    const s = emptySeries();
    for (let i = 0; i < data.steps.length; i++) {
      s.steps.push(data.steps[i]);
      s.values.push(data.values[i]);
      s.walls.push(data.walls[i]);
      s.stepIndex.set(data.steps[i], i);
    }
    s.downsampled = data.downsampled;
    chart.series[name] = s;
  }

  function addPoint(chart, name, step, value, wall) {
    let s = chart.series[name];
    if (!s) s = chart.series[name] = emptySeries();
    if (s.stepIndex.has(step)) {
      state.duplicates += 1;
      return;
    }
    // Points arrive in step order almost always; insert in place otherwise.
    let i = s.steps.length;
    if (i && s.steps[i - 1] > step) {
      i = s.steps.findIndex((x) => x > step);
      s.steps.splice(i, 0, step);
      s.values.splice(i, 0, value);
      s.walls.splice(i, 0, wall);
      s.stepIndex = new Map(s.steps.map((x, k) => [x, k]));
    } else {
      s.steps.push(step);
      s.values.push(value);
      s.walls.push(wall);
      s.stepIndex.set(step, i);
    }
  }

  function chartWants(chart, name) {
    return chart.metrics.has(name) || (chart.spec.prefix && name.startsWith(chart.spec.prefix)) ||
      (chart.spec.band && chart.spec.band.includes(name));
  }

  // --- loading from the server -------------------------------------------------------------

  async function fetchSeries(runId, name, window, until) {
    const params = new URLSearchParams({ name, points: "1500" });
    if (window) {
      params.set("lo", Math.floor(window[0]));
      params.set("hi", Math.ceil(window[1]));
    }
    if (until !== undefined && until !== null) params.set("until", until);
    const url = `/runs/${runId}/series/?${params}`;
    const resp = await fetch(url, { credentials: "same-origin" });
    if (!resp.ok) throw new Error(`${url}: ${resp.status}`);
    return resp.json();
  }

  async function metricNames(runId) {
    const resp = await fetch(`/runs/${runId}/metrics/`, { credentials: "same-origin" });
    return resp.ok ? (await resp.json()).names : [];
  }

  function namesOf(chart) {
    const names = new Set(chart.metrics);
    if (chart.spec.band) chart.spec.band.forEach((n) => names.add(n));
    return [...names];
  }

  async function loadChart(chart, until) {
    // Points that stream in while the request is out (ids > until) are kept aside and added
    // back on top of the answer (ids <= until): the two never overlap.
    if (!chart.liveLog) chart.liveLog = [];
    const names = namesOf(chart);
    try {
      const results = await Promise.all(names.map((n) => fetchSeries(state.run, n, chart.window, until)));
      names.forEach((n, i) => setSeries(chart, n, results[i]));
    } finally {
      const pending = chart.liveLog;
      chart.liveLog = null;
      for (const [name, step, value, wall] of pending) receivePoint(chart, name, step, value, wall);
    }
  }

  function receivePoint(chart, name, step, value, wall) {
    if (chart.liveLog) {
      chart.liveLog.push([name, step, value, wall]);
      return;
    }
    if (chart.window && (step < chart.window[0] || step > chart.window[1])) return;
    addPoint(chart, name, step, value, wall);
  }

  async function loadAll() {
    const until = state.cursor.metrics;
    Object.values(charts).forEach((c) => { if (!c.liveLog) c.liveLog = []; });
    const names = await metricNames(state.run);
    for (const chart of Object.values(charts)) {
      if (chart.spec.prefix) names.filter((n) => n.startsWith(chart.spec.prefix)).forEach((n) => chart.metrics.add(n));
    }
    await Promise.all(Object.values(charts).map((c) => loadChart(c, until)));
    state.loaded = true;
    scheduleRender();
  }

  // --- drawing -----------------------------------------------------------------------------

  function debiasedEma(values, weight) {
    // TensorBoard's smoothing: an EMA whose start-up bias towards 0 is divided out.
    const out = new Array(values.length);
    let last = 0, n = 0;
    for (let i = 0; i < values.length; i++) {
      const v = values[i];
      if (!Number.isFinite(v)) { out[i] = v; continue; }
      last = last * weight + (1 - weight) * v;
      n += 1;
      out[i] = weight === 0 ? v : last / (1 - Math.pow(weight, n));
    }
    return out;
  }

  function xs(s) {
    return state.xaxis === "step" ? s.steps : s.walls.map((w) => new Date(w * 1000));
  }

  function lineTraces(s, name, color, label, showRaw) {
    const traces = [];
    if (!s || !s.steps.length) return traces;
    const x = xs(s);
    if (state.smoothing > 0) {
      if (showRaw) traces.push({ x, y: s.values, name: `${label} (raw)`, mode: "lines", line: { color, width: 1 }, opacity: 0.25, hoverinfo: "skip", showlegend: false, meta: { metric: name, raw: true } });
      traces.push({ x, y: debiasedEma(s.values, state.smoothing), name: label, mode: "lines", line: { color, width: 2 }, meta: { metric: name } });
    } else {
      traces.push({ x, y: s.values, name: label, mode: "lines+markers", marker: { size: 3 }, line: { color, width: 1.5 }, meta: { metric: name } });
    }
    return traces;
  }

  function bandTraces(chart, color) {
    const [meanName, stdName] = chart.spec.band;
    const mean = chart.series[meanName], std = chart.series[stdName];
    if (!mean || !std || !mean.steps.length) return [];
    const x = [], upper = [], lower = [];
    mean.steps.forEach((step, i) => {
      const j = std.stepIndex.get(step);
      if (j === undefined) return;
      x.push(state.xaxis === "step" ? step : new Date(mean.walls[i] * 1000));
      upper.push(mean.values[i] + std.values[j]);
      lower.push(mean.values[i] - std.values[j]);
    });
    if (!x.length) return [];
    return [
      { x, y: lower, mode: "lines", line: { width: 0 }, hoverinfo: "skip", showlegend: false, name: "−std" },
      { x, y: upper, mode: "lines", line: { width: 0 }, fill: "tonexty", fillcolor: hexAlpha(color, 0.15), hoverinfo: "skip", showlegend: false, name: "+std" },
    ];
  }

  function hexAlpha(hex, a) {
    const n = parseInt(hex.slice(1), 16);
    return `rgba(${(n >> 16) & 255},${(n >> 8) & 255},${n & 255},${a})`;
  }

  function tracesFor(chart) {
    let traces = [];
    const metrics = [...chart.metrics].filter((m) => !(chart.spec.band && m === chart.spec.band[1]));
    const single = metrics.length === 1;
    if (chart.spec.band) traces = traces.concat(bandTraces(chart, COLORS[0]));
    metrics.forEach((m, i) => {
      const label = state.overlays.length ? `#${state.run} ${m}` : m;
      traces = traces.concat(lineTraces(chart.series[m], m, COLORS[i % COLORS.length], label, true));
    });
    state.overlays.forEach((o, k) => {
      metrics.forEach((m, i) => {
        const s = o.charts[chart.spec.id] && o.charts[chart.spec.id][m];
        const color = COLORS[(k + 1 + i) % COLORS.length];
        traces = traces.concat(lineTraces(s, m, color, `#${o.id} ${o.name}${single ? "" : " " + m}`, false).map((t) => Object.assign(t, { line: Object.assign(t.line, { dash: "dot" }) })));
      });
    });
    return traces;
  }

  function layoutFor(chart, hasData) {
    const legend = hasData && (chart.metrics.size > 1 || state.overlays.length > 0);
    return {
      annotations: hasData ? [] : [{ text: state.loaded ? "no data (yet)" : "loading…", showarrow: false, xref: "paper", yref: "paper", x: 0.5, y: 0.5, font: { color: "#677087" } }],
      margin: { l: 48, r: 12, t: legend ? 28 : 8, b: 36 },
      height: 260,
      showlegend: legend,
      legend: { orientation: "h", x: 0, y: 1.02, yanchor: "bottom", font: { size: 11 } },
      xaxis: { title: { text: state.xaxis === "step" ? "step" : "wall time" }, type: state.xaxis === "step" ? "linear" : "date", zeroline: false },
      yaxis: { type: state.log ? "log" : "linear", zeroline: false, automargin: true },
      // Keeps the user's zoom across redraws; changes when the axis kind changes.
      uirevision: `${state.xaxis}-${state.log}-${state.attempts}`,
      paper_bgcolor: "rgba(0,0,0,0)",
      plot_bgcolor: "#fff",
      font: { size: 12 },
    };
  }

  const PLOT_CONFIG = { displaylogo: false, responsive: true, modeBarButtonsToRemove: ["lasso2d", "select2d"] };
  let renderPending = false;
  function scheduleRender() {
    if (renderPending) return;
    renderPending = true;
    setTimeout(() => {
      renderPending = false;
      render();
    }, 200);
  }

  function render() {
    if (!window.Plotly) return;
    for (const chart of Object.values(charts)) {
      if (!chart.el) continue;
      const traces = tracesFor(chart);
      const hasData = traces.length > 0;
      chart.el.classList.toggle("no-data", !hasData);
      const layout = layoutFor(chart, hasData);
      if (!hasData) {
        layout.xaxis.visible = false;
        layout.yaxis.visible = false;
      }
      Plotly.react(chart.el, traces, layout, PLOT_CONFIG);
      if (!chart.bound) {
        chart.bound = true;
        chart.el.on("plotly_relayout", (ev) => onZoom(chart, ev));
      }
    }
    updateEta();
  }

  // --- zoom: ask the server again for the visible window ------------------------------------

  function toStep(chart, x) {
    if (state.xaxis === "step") return Number(x);
    // Wall time -> step, by the chart's own points (monotonic in practice).
    const t = new Date(x).getTime() / 1000;
    const s = Object.values(chart.series).find((v) => v.steps.length);
    if (!s) return null;
    let i = s.walls.findIndex((w) => w >= t);
    if (i < 0) return s.steps[s.steps.length - 1];
    return s.steps[Math.max(0, i - (s.walls[i] > t ? 1 : 0))];
  }

  async function onZoom(chart, ev) {
    let window = undefined;
    if (ev["xaxis.autorange"]) window = null;
    else if (ev["xaxis.range[0]"] !== undefined) window = [toStep(chart, ev["xaxis.range[0]"]), toStep(chart, ev["xaxis.range[1]"])];
    else if (ev["xaxis.range"]) window = [toStep(chart, ev["xaxis.range"][0]), toStep(chart, ev["xaxis.range"][1])];
    if (window === undefined) return;
    if (window && (window[0] === null || window[1] === null)) return;
    chart.window = window;
    chart.zoomRequests = (chart.zoomRequests || 0) + 1;
    await loadChart(chart, state.cursor.metrics);
    await Promise.all(state.overlays.map((o) => loadOverlayChart(o, chart)));
    scheduleRender();
  }

  // --- overlays of other runs --------------------------------------------------------------

  async function loadOverlayChart(o, chart) {
    o.charts[chart.spec.id] = {};
    const names = [...chart.metrics].filter((m) => !(chart.spec.band && m === chart.spec.band[1]));
    const results = await Promise.all(names.map((n) => fetchSeries(o.id, n, chart.window)));
    names.forEach((n, i) => {
      const tmp = {};
      setSeries({ series: tmp }, n, results[i]);
      o.charts[chart.spec.id][n] = tmp[n];
    });
  }

  async function addOverlay(id) {
    id = Number(id);
    if (!id || id === state.run || state.overlays.some((o) => o.id === id)) return;
    const resp = await fetch(`/runs/summaries/?id=${id}`, { credentials: "same-origin" });
    const found = resp.ok ? (await resp.json()).runs[0] : null;
    const box = $("#overlays");
    if (!found) {
      flash(box, `no run #${id} that you can see`);
      return;
    }
    const o = { id, name: found.name, charts: {} };
    await Promise.all(Object.values(charts).map((c) => loadOverlayChart(o, c)));
    state.overlays.push(o);
    renderOverlayList();
    scheduleRender();
  }

  function flash(box, text) {
    const span = document.createElement("span");
    span.className = "error small";
    span.textContent = text;
    box.appendChild(span);
    setTimeout(() => span.remove(), 4000);
  }

  function renderOverlayList() {
    const box = $("#overlays");
    box.textContent = "";
    state.overlays.forEach((o) => {
      const chip = document.createElement("span");
      chip.className = "badge overlay-chip";
      chip.textContent = `#${o.id} ${o.name} `;
      const x = document.createElement("button");
      x.type = "button";
      x.className = "linklike";
      x.textContent = "×";
      x.title = "remove";
      x.onclick = () => {
        state.overlays = state.overlays.filter((v) => v !== o);
        renderOverlayList();
        scheduleRender();
      };
      chip.appendChild(x);
      box.appendChild(chip);
    });
  }

  // --- the live stream -----------------------------------------------------------------------

  let reconnectDelay = 1000;
  function connect() {
    const proto = location.protocol === "https:" ? "wss" : "ws";
    const ws = new WebSocket(`${proto}://${location.host}${live.ws_path}`);
    state.socket = ws;
    setLiveState("connecting…");
    ws.onopen = () => {
      state.connections += 1;
      reconnectDelay = 1000;
      ws.send(JSON.stringify({ type: "subscribe", cursor: state.cursor, samples: false }));
      setLiveState("live");
    };
    ws.onmessage = (ev) => {
      const msg = JSON.parse(ev.data);
      if (msg.type === "changes") onChanges(msg);
    };
    ws.onclose = (ev) => {
      if (state.socket !== ws) return;
      state.socket = null;
      if (ev.code === 4404 || ev.code === 4401) {
        setLiveState("not allowed");
        return;
      }
      setLiveState("reconnecting…");
      setTimeout(connect, reconnectDelay);
      reconnectDelay = Math.min(10000, reconnectDelay * 2);
    };
  }

  function setLiveState(text) {
    const el = $("#live-state");
    if (el) el.textContent = text;
  }

  function onChanges(msg) {
    if (msg.run && msg.run.attempts !== state.attempts) {
      // Resumed: the server discarded the steps after the checkpoint. Start the charts over.
      state.attempts = msg.run.attempts;
      state.cursor = msg.cursor;
      applySummary(msg.run);
      appendLogs(msg.logs || []);
      Object.values(charts).forEach((c) => { c.series = {}; });
      loadAll(); // up to msg.cursor, which covers this message's points
      return;
    }
    for (const [step, name, value, wall] of msg.metrics || []) {
      state.received += 1;
      for (const chart of Object.values(charts)) {
        if (!chartWants(chart, name)) continue;
        if (chart.spec.prefix && name.startsWith(chart.spec.prefix)) chart.metrics.add(name);
        receivePoint(chart, name, step, value, wall);
      }
    }
    appendLogs(msg.logs || []);
    state.cursor = msg.cursor;
    if (msg.run) applySummary(msg.run);
    if ((msg.metrics || []).length) scheduleRender();
  }

  function appendLogs(lines) {
    if (!lines.length) return;
    const pre = $("#run-log");
    const atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
    for (const [time, level, message] of lines) {
      const span = document.createElement("span");
      span.className = `log-${String(level).toLowerCase()}`;
      span.textContent = `${new Date(time).toTimeString().slice(0, 8)} ${level} ${message}`;
      pre.appendChild(span);
      pre.appendChild(document.createTextNode("\n"));
    }
    while (pre.childNodes.length > 1000) pre.removeChild(pre.firstChild);
    if (atBottom) pre.scrollTop = pre.scrollHeight;
  }

  const STATUS_LABELS = { lost: "lost (worker stopped)" };
  function applySummary(run) {
    state.summary = run;
    state.status = run.status;
    state.currentStep = run.current_step;
    state.totalSteps = run.total_steps;
    const badge = $("#run-status");
    badge.className = `badge status-${run.status}`;
    badge.dataset.status = run.status;
    badge.textContent = STATUS_LABELS[run.status] || run.status;
    const pct = run.total_steps ? Math.min(100, (100 * run.current_step) / run.total_steps) : 0;
    $("#run-progress").style.width = `${pct}%`;
    $("#run-steps").textContent = `${run.current_step} / ${run.total_steps}`;
    if (run.last_reward !== null && run.last_reward !== undefined) $("#run-reward").textContent = run.last_reward.toFixed(3);
    if (run.last_eval_accuracy !== null && run.last_eval_accuracy !== undefined) $("#run-eval").textContent = run.last_eval_accuracy.toFixed(3);
    $("#run-attempts").textContent = run.attempts;
    const active = run.status === "queued" || run.status === "running";
    document.querySelectorAll("[data-show-when=active]").forEach((el) => { el.hidden = !active; });
    document.querySelectorAll("[data-show-when=resumable]").forEach((el) => { el.hidden = !run.can_resume; });
    const errorBox = $("#run-error-box");
    errorBox.hidden = !run.error;
    if (run.error) $("#run-error").textContent = run.error;
    if (run.started_at) $("#run-started").dataset.started = run.started_at;
    $("#run-duration").dataset.finished = run.finished_at || "";
    renderCheckpoints(run.checkpoints || []);
    const removed = run.checkpoints_removed || 0;
    $("#run-checkpoints-removed").textContent = removed
      ? `${removed} older checkpoint${removed === 1 ? "" : "s"} removed by keep-N; resume continues from the newest on disk.` : "";
    updateEta();
  }

  function renderCheckpoints(rows) {
    const body = $("#run-checkpoints");
    body.textContent = "";
    if (!rows.length) {
      body.innerHTML = '<tr class="empty-row"><td colspan="4" class="muted">none yet</td></tr>';
      return;
    }
    for (const [step, path, size] of rows) {
      const tr = document.createElement("tr");
      const cells = [step, path, humanSize(size), "on disk"];
      cells.forEach((v, i) => {
        const td = document.createElement("td");
        td.textContent = v;
        if (i === 0 || i === 2) td.className = "num";
        if (i === 1) td.className = "mono small";
        tr.appendChild(td);
      });
      body.appendChild(tr);
    }
  }

  function humanSize(n) {
    const units = ["B", "KiB", "MiB", "GiB"];
    let i = 0;
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
    return i ? `${n.toFixed(1)} ${units[i]}` : `${n} B`;
  }

  function fmtDuration(seconds) {
    seconds = Math.max(0, Math.round(seconds));
    const h = Math.floor(seconds / 3600), m = Math.floor((seconds % 3600) / 60), s = seconds % 60;
    if (h) return `${h}h ${String(m).padStart(2, "0")}m`;
    if (m) return `${m}m ${String(s).padStart(2, "0")}s`;
    return `${s}s`;
  }

  function secondsPerStep() {
    // The engine's own step time when it reports one, else the pace of the reward points.
    const timing = charts["chart-timings"].series["time/step"];
    if (timing && timing.values.length) {
      const recent = timing.values.slice(-10);
      return recent.reduce((a, b) => a + b, 0) / recent.length;
    }
    const r = charts["chart-reward"].series["reward/mean"];
    if (r && r.steps.length >= 2) {
      const k = Math.max(0, r.steps.length - 20), n = r.steps.length - 1;
      const ds = r.steps[n] - r.steps[k];
      if (ds > 0) return (r.walls[n] - r.walls[k]) / ds;
    }
    return null;
  }

  function updateEta() {
    const eta = $("#run-eta");
    if (state.status !== "running") {
      eta.textContent = state.status === "queued" ? "waiting for a worker" : "";
      return;
    }
    const sps = secondsPerStep();
    const remaining = state.totalSteps - state.currentStep;
    eta.textContent = sps !== null ? `ETA ${fmtDuration(sps * remaining)} (${sps.toFixed(2)} s/step)` : "estimating…";
  }

  function tickDuration() {
    const el = $("#run-duration");
    const started = $("#run-started").dataset.started;
    if (!started) return;
    const end = el.dataset.finished ? new Date(el.dataset.finished) : new Date();
    el.textContent = fmtDuration((end - new Date(started)) / 1000);
  }

  // --- controls ------------------------------------------------------------------------------

  document.querySelectorAll("input[name=xaxis]").forEach((el) => el.addEventListener("change", () => {
    state.xaxis = el.value;
    scheduleRender();
  }));
  const slider = $("#smoothing");
  slider.addEventListener("input", () => {
    state.smoothing = Number(slider.value);
    $("#smoothing-value").textContent = state.smoothing.toFixed(2);
    scheduleRender();
  });
  $("#logscale").addEventListener("change", (ev) => {
    state.log = ev.target.checked;
    scheduleRender();
  });
  $("#compare-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    addOverlay($("#compare-input").value);
    $("#compare-input").value = "";
  });

  window.addEventListener("beforeunload", () => { state.closedByPage = true; });

  window.rlwebRun = {
    state,
    charts,
    /** Steps of `metric` as drawn in chart `chartId` (the test's view of "the chart"). */
    chartSteps(chartId, metric) {
      const s = charts[chartId].series[metric];
      return s ? s.steps.slice() : [];
    },
    chartValues(chartId, metric) {
      const s = charts[chartId].series[metric];
      return s ? s.values.slice() : [];
    },
    /** Drop the socket as a network failure would; the page reconnects with its cursor. */
    dropSocket() {
      if (state.socket) state.socket.close();
    },
    addOverlay,
    render,
  };

  setInterval(tickDuration, 1000);
  const params = new URLSearchParams(location.search);
  loadAll()
    .then(() => {
      connect();
      (params.get("compare") || "").split(",").filter(Boolean).forEach((id) => addOverlay(id));
    })
    .catch((err) => {
      console.error(err);
      setLiveState("could not load the series");
      connect();
    });
})();

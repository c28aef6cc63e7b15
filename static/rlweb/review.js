// Live samples in the sample browser. The page subscribes to its run's stream
// (rlweb/runs/consumers.py) from the newest sample it rendered; new samples appear at the top of
// the unfiltered, newest-first first page, or are counted with a link elsewhere (they may not match
// the filters or the sort). "Pause live" holds new samples back; "Resume" shows what arrived.
// Everything from the server is inserted as text, never as HTML.
(function () {
  "use strict";
  const config = document.getElementById("live-config");
  if (!config) return;
  const stateEl = document.getElementById("live-state");
  const toggle = document.getElementById("live-toggle");
  const pendingEl = document.getElementById("live-pending");
  const table = document.getElementById("samples");
  const prepend = config.dataset.prepend === "1";
  const componentColumns = parseInt(config.dataset.components || "0", 10);
  const MAX_ROWS = 500;
  let cursor = JSON.parse(document.getElementById("live-cursor").textContent);
  let paused = false;
  let held = [];
  let elsewhere = 0;
  let retry = 1000;

  function setState(state, text) {
    stateEl.dataset.state = state;
    stateEl.textContent = text;
  }

  function fixed(value, digits) {
    return value === null || value === undefined ? "—" : Number(value).toFixed(digits);
  }

  function cell(text, className) {
    const td = document.createElement("td");
    if (className) td.className = className;
    if (text instanceof Node) td.appendChild(text);
    else td.textContent = text;
    return td;
  }

  function link(href, text, title) {
    const a = document.createElement("a");
    a.href = href;
    a.textContent = text;
    if (title) a.title = title;
    return a;
  }

  function row(sample) {
    const tr = document.createElement("tr");
    tr.dataset.id = sample.id;
    tr.className = "live-new";
    const sampleUrl = config.dataset.sampleUrl.replace(/\/0\/$/, "/" + encodeURIComponent(sample.id) + "/");
    const first = document.createElement("span");
    first.appendChild(expandButton(sampleUrl + "response.txt"));
    first.append(" ");
    const a = link(sampleUrl, "#" + sample.id);
    a.className = "sample-link";
    first.appendChild(a);
    if (sample.split === "eval") {
      const badge = document.createElement("span");
      badge.className = "badge";
      badge.textContent = "eval";
      first.append(" ", badge);
    }
    tr.appendChild(cell(first));
    tr.appendChild(cell(String(sample.step), "num"));
    const status = document.createElement("span");
    status.className = "badge status-" + String(sample.status).replace(/[^a-z_]/g, "");
    status.textContent = sample.status;
    tr.appendChild(cell(status));
    tr.appendChild(cell(sample.finish_reason || "—"));
    tr.appendChild(cell(fixed(sample.reward, 3), "num reward"));
    for (let i = 0; i < componentColumns; i++) tr.appendChild(cell("", "num component"));
    tr.appendChild(cell(fixed(sample.advantage, 3), "num"));
    tr.appendChild(cell(String(sample.response_len), "num"));
    tr.appendChild(cell(String(sample.staleness), "num"));
    tr.appendChild(cell(sample.data_source || ""));
    tr.appendChild(cell(""));
    const groupUrl = config.dataset.groupUrl.replace("GROUP", encodeURIComponent(sample.group_id)) +
      "?step=" + encodeURIComponent(sample.step) + "&sample=" + encodeURIComponent(sample.id);
    tr.appendChild(cell(link(groupUrl, "group", "all samples of this prompt at this step")));
    tr.appendChild(cell(""));
    return tr;
  }

  function expandButton(url) {
    const button = document.createElement("button");
    button.type = "button";
    button.className = "expand";
    button.dataset.url = url;
    button.setAttribute("aria-expanded", "false");
    button.title = "show the response here";
    button.textContent = "▸";
    return button;
  }

  // A row's ▸ shows its response in a row below it, fetched on demand (the list itself never
  // loads response text).
  table.addEventListener("click", function (event) {
    const button = event.target.closest("button.expand");
    if (!button) return;
    const tr = button.closest("tr");
    const next = tr.nextElementSibling;
    if (next && next.classList.contains("response-row")) {
      next.remove();
      button.setAttribute("aria-expanded", "false");
      button.textContent = "▸";
      return;
    }
    button.setAttribute("aria-expanded", "true");
    button.textContent = "▾";
    const row = document.createElement("tr");
    row.className = "response-row";
    const td = document.createElement("td");
    td.colSpan = tr.cells.length;
    const pre = document.createElement("pre");
    pre.className = "light";
    pre.textContent = "loading…";
    td.appendChild(pre);
    row.appendChild(td);
    tr.after(row);
    fetch(button.dataset.url, { credentials: "same-origin" })
      .then(function (response) { return response.ok ? response.text() : Promise.reject(response.status); })
      .then(function (text) { pre.textContent = text || "(empty response)"; })
      .catch(function (status) { pre.textContent = "could not load the response (" + status + ")"; });
  });

  function showPending() {
    pendingEl.textContent = "";
    if (paused && held.length) {
      pendingEl.textContent = held.length + " new sample" + (held.length === 1 ? "" : "s") + " held while paused";
    } else if (elsewhere) {
      pendingEl.append(elsewhere + " new sample" + (elsewhere === 1 ? "" : "s") + " since this page loaded · ");
      const params = new URLSearchParams(location.search);
      params.delete("after");
      params.delete("before");
      pendingEl.appendChild(link(location.pathname + (params.toString() ? "?" + params : ""), "reload"));
    }
  }

  function show(samples) {
    if (!prepend) {
      elsewhere += samples.length;
      showPending();
      return;
    }
    const wrap = document.getElementById("samples-wrap");
    const empty = document.getElementById("no-samples");
    if (wrap) wrap.hidden = false;
    if (empty) empty.remove();
    const body = table.tBodies[0];
    // Samples arrive oldest first: inserting each at the top leaves the newest on top.
    for (const sample of samples) {
      if (body.querySelector('tr[data-id="' + Number(sample.id) + '"]')) continue;
      body.insertBefore(row(sample), body.firstChild);
    }
    while (body.rows.length > MAX_ROWS) body.deleteRow(body.rows.length - 1);
  }

  function receive(samples) {
    if (paused) {
      held.push(...samples);
      showPending();
    } else {
      show(samples);
    }
  }

  toggle.addEventListener("click", function () {
    paused = !paused;
    toggle.setAttribute("aria-pressed", paused ? "true" : "false");
    toggle.textContent = paused ? "Resume live" : "Pause live";
    if (!paused && held.length) {
      const release = held;
      held = [];
      show(release);
    }
    setState(paused ? "paused" : "live", paused ? "paused" : "live");
    showPending();
  });

  function connect() {
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    const socket = new WebSocket(scheme + "//" + location.host + config.dataset.socket);
    socket.onopen = function () {
      retry = 1000;
      // Metric points and log lines are not shown here; the cursor starts them at the newest.
      socket.send(JSON.stringify({ type: "subscribe", cursor: cursor }));
      setState(paused ? "paused" : "live", paused ? "paused" : "live");
    };
    socket.onmessage = function (event) {
      const message = JSON.parse(event.data);
      if (message.type !== "changes") return;
      cursor = message.cursor;
      if (message.samples && message.samples.length) receive(message.samples);
    };
    socket.onclose = function (event) {
      if (event.code === 4401 || event.code === 4404) {
        setState("offline", "not available");
        return;
      }
      setState("offline", "offline — reconnecting");
      setTimeout(connect, retry);
      retry = Math.min(retry * 2, 30000);
    };
  }
  connect();
})();

// The controller's live dashboard (docs/report.md): run status, a live chart of
// iteration times, per-link throughput, agent health and clock bounds, from the
// controller's WebSocket feed (/api/feed) and its run API (/api/runs/ID).
// The token arrives once, in the URL's fragment (#token=...), which browsers
// never send to a server; the page removes it from the address bar at once and
// keeps it in this tab only.
(function () {
  "use strict";
  const key = "tw-token";
  let token = sessionStorage.getItem(key) || "";
  const m = /(?:^#|&)token=([^&]+)/.exec(location.hash);
  let badToken = false;
  if (m) {
    try {
      token = decodeURIComponent(m[1]);
      sessionStorage.setItem(key, token);
    } catch (e) {
      badToken = true;  // not %-encoded properly: refused below, like none
      token = "";
    }
    history.replaceState(null, "", location.pathname);
  }
  const main = document.getElementById("dashboard");
  const subtitle = document.getElementById("subtitle");
  const { colors, el, fmt } = window.twPage;
  const us = (ns) => (ns === undefined || ns === null ? "–" : (ns / 1e3).toFixed(1) + " us");

  const state = { run: null, state: "connecting", iterations: new Map(), planned: 0, done: 0, flows: [], rates: new Map(),
                  last: null, ws: false, closed: false, error: "" };
  window.twState = () => ({
    state: state.state, iterations: state.iterations.size, done: state.done, ws_open: state.ws, closed: state.closed,
    agents: state.run ? state.run.agents.map((a) => ({ rank: a.rank, pid: a.pid, connected: a.connected, done: a.done, error: a.error || "" })) : [],
    failed_agents: state.run ? state.run.agents.filter((a) => a.error).length : 0,
    links: state.rates.size, error: state.error,
  });

  // Layout: status, iteration chart, links, agents.
  const section = (title, what) => window.twPage.section(main, title, what);
  const statusBox = el("div", { class: "chart", "data-chart": "run status", "data-points": "0" });
  section("Run", "State, progress and throughput, as the controller reports them.").appendChild(statusBox);
  const iterBox = el("div", { class: "chart", "data-chart": "iteration time", "data-points": "0" }, el("h3", { text: "job-wide iteration time (ms)" }));
  section("Iterations", "Each completed iteration's time, live.").appendChild(iterBox);
  const linkBox = el("div", { class: "chart", "data-chart": "links", "data-points": "0" }, el("h3", { text: "sender (rows) to receiver (columns), Gb/s over the last second" }));
  section("Links", "Each flow's send rate, from the bytes the agents report (every 100 ms).").appendChild(linkBox);
  const agentBox = el("div", { class: "chart", "data-chart": "agents", "data-points": "0" });
  section("Agents", "Every agent: its rank, host and process, whether it is connected, its iterations, its clock against the controller's (offset and error bound), and its error if it failed.").appendChild(agentBox);

  let plot = null;
  const drawIterations = () => {
    const xs = [...state.iterations.keys()].sort((a, b) => a - b);
    const ys = xs.map((i) => state.iterations.get(i) / 1e6);
    iterBox.setAttribute("data-points", String(xs.length));
    if (!xs.length) return;
    if (!plot) {
      plot = new uPlot({ width: Math.max(320, Math.floor(iterBox.getBoundingClientRect().width) - 36), height: 240,
        scales: { x: { time: false } }, axes: [{ label: "iteration" }, { label: "ms" }],
        series: [{ label: "iteration" }, { label: "iteration time", stroke: colors[0], width: 2 }] }, [xs, ys], iterBox);
    } else {
      plot.setData([xs, ys]);
    }
  };
  const drawStatus = () => {
    const r = state.run;
    statusBox.replaceChildren();
    const rows = [["state", state.state], ["iterations", state.done + " of " + state.planned],
                  ["last iteration", state.last === null ? "–" : fmt(state.last / 1e6) + " ms"],
                  ["throughput", state.throughput === undefined ? "–" : fmt(state.throughput / 1e9) + " Gb/s"],
                  ["bytes sent", state.bytes === undefined ? "–" : String(state.bytes)]];
    if (r) rows.unshift(["run", r.id + " (" + r.profile + ", " + r.ranks + " ranks)"]);
    if (state.error) rows.push(["error", state.error]);
    const t = el("table");
    for (const [k, v] of rows) t.appendChild(el("tr", {}, el("th", { text: k }), el("td", { class: "text", text: v })));
    statusBox.appendChild(t);
    statusBox.setAttribute("data-points", String(rows.length));
    subtitle.textContent = (r ? "run " + r.id + " · " : "") + state.state + (state.closed ? " · the controller closed the feed" : "");
  };
  const drawAgents = () => {
    agentBox.replaceChildren();
    const agents = state.run ? state.run.agents : [];
    const t = el("table");
    t.appendChild(el("tr", {}, ...["rank", "host", "pid", "connected", "iterations", "clock offset", "± bound", "error"].map((h) => el("th", { text: h }))));
    for (const a of agents) {
      const c = a.clock || {};
      const tr = el("tr", { "data-rank": String(a.rank), class: a.error ? "failed" : "" },
        ...[a.rank === undefined ? "–" : a.rank, a.host, a.pid, a.connected ? "yes" : "no", a.iterations_done === undefined ? "–" : a.iterations_done,
            us(c.offset_ns), us(c.bound_ns), a.error || ""].map((v, i) => el("td", { text: String(v), class: i === 7 ? "text" : "" })));
      if (a.error) tr.style.background = "#fde7e2";
      t.appendChild(tr);
    }
    agentBox.appendChild(t);
    agentBox.setAttribute("data-points", String(agents.length));
  };
  const drawLinks = () => {
    const ranks = state.run ? state.run.ranks : 0;
    linkBox.querySelectorAll("table").forEach((x) => x.remove());
    const t = el("table", { class: "heat" });
    t.appendChild(el("tr", {}, el("th", { text: "from \\ to" }), ...Array.from({ length: ranks }, (_, d) => el("th", { text: "rank " + d }))));
    const max = Math.max(1e-9, ...state.rates.values());
    for (let s = 0; s < ranks; s++) {
      t.appendChild(el("tr", {}, el("th", { text: "rank " + s }), ...Array.from({ length: ranks }, (_, d) => {
        const v = state.rates.get(s + ">" + d);
        if (v === undefined) return el("td", { class: "cell none", text: "·" });
        const a = 0.12 + 0.88 * (v / max);
        return el("td", { class: "cell", text: fmt(v / 1e9), style: "background: rgba(47,111,221," + a.toFixed(2) + "); color: " + (a > 0.6 ? "#fff" : "#1d2430") });
      })));
    }
    linkBox.appendChild(t);
    linkBox.setAttribute("data-points", String(state.rates.size));
  };

  // Per flow: the rate over about the last second, from the running byte counts.
  const flowHistory = new Map();  // "src>dst" -> [[t, bytes], ...]
  const onProgress = (p) => {
    state.done = p.iterations_done;
    state.planned = p.iterations;
    state.throughput = p.throughput_bps;
    state.bytes = p.bytes_sent;
    if (p.last_iteration_ns !== undefined) state.last = p.last_iteration_ns;
    for (const [i, ns] of p.recent_iteration_ns || []) state.iterations.set(i, ns);
    const now = performance.now();
    const sums = new Map();
    for (const [src, dst, b] of p.flow_bytes || []) sums.set(src + ">" + dst, (sums.get(src + ">" + dst) || 0) + b);
    for (const [k, b] of sums) {
      const h = flowHistory.get(k) || [];
      h.push([now, b]);
      while (h.length > 2 && now - h[1][0] > 1000) h.shift();
      flowHistory.set(k, h);
      if (h.length >= 2 && h[h.length - 1][0] > h[0][0]) {
        state.rates.set(k, (8 * (h[h.length - 1][1] - h[0][1])) / ((h[h.length - 1][0] - h[0][0]) / 1e3));
      }
    }
    drawStatus();
    drawIterations();
    drawLinks();
  };
  const onStatus = (run) => {
    state.run = run;
    state.state = run.state;
    state.planned = run.iterations;
    state.done = run.iterations_done;
    state.error = run.error || "";
    drawStatus();
    drawAgents();
    drawLinks();
  };

  // The run's details between status messages (clock bounds move with each re-sync).
  const poll = async () => {
    if (!state.run || state.closed) return;
    try {
      const r = await fetch("/api/runs/" + encodeURIComponent(state.run.id), { headers: { Authorization: "Bearer " + token }, cache: "no-store" });
      if (r.ok) onStatus(await r.json());
    } catch (e) {
      // The controller is gone: the feed's close says so.
    }
  };
  setInterval(poll, 1000);

  if (!token) {
    state.state = (badToken ? "the address's token is malformed" : "no token") + ": open the address tensorwire run printed, with its #token=...";
    drawStatus();
    document.body.setAttribute("data-ready", "1");
    return;
  }
  const ws = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/api/feed?token=" + encodeURIComponent(token));
  ws.onopen = () => { state.ws = true; state.state = "connected"; drawStatus(); };
  ws.onmessage = (ev) => {
    const msg = JSON.parse(ev.data);
    if (msg.type === "status") onStatus(msg.run);
    else if (msg.type === "progress") onProgress(msg);
  };
  let opened = false;
  ws.addEventListener("open", () => { opened = true; });
  ws.onclose = () => {
    state.ws = false;
    state.closed = true;
    // Closed before it opened: the controller refused the token (or is gone).
    if (!opened) state.state = "the controller refused the token, or is not there";
    // Nothing flows any more: the rates shown are the last ones.
    linkBox.querySelector("h3").textContent = "sender (rows) to receiver (columns), Gb/s: the last second before the feed closed";
    drawStatus();
  };
  drawStatus();
  drawAgents();
  drawLinks();
  document.body.setAttribute("data-ready", "1");
})();

// Draws a tensorwire report from the JSON in #tw-data (docs/report.md). Every
// chart records how many points it drew in data-points, for people and tests.
(function () {
  "use strict";
  const data = JSON.parse(document.getElementById("tw-data").textContent);
  const main = document.getElementById("report");
  const { colors, el, fmt } = window.twPage;
  const bytes = (b) => {
    if (b === null || b === undefined || b < 0) return "–";
    const u = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    while (b >= 1024 && i < u.length - 1) { b /= 1024; i++; }
    return (i ? b.toFixed(1) : String(b)) + " " + u[i];
  };
  const section = (title, what) => window.twPage.section(main, title, what);
  const chartBox = (parent, title, points) => {
    const box = el("div", { class: "chart", "data-chart": title, "data-points": String(points) }, el("h3", { text: title }));
    parent.appendChild(box);
    return box;
  };
  const table = (head, rows, textCols) => {
    const t = el("table");
    t.appendChild(el("tr", {}, ...head.map((h) => el("th", { text: h }))));
    for (const r of rows) t.appendChild(el("tr", {}, ...r.map((c, i) => el("td", { text: String(c), class: (textCols || []).includes(i) ? "text" : "" }))));
    return t;
  };
  const width = (box) => Math.max(320, Math.floor(box.getBoundingClientRect().width) - 36);
  const sources = data.sources;

  document.getElementById("subtitle").textContent =
    sources.map((s) => s.label + ": " + s.path).join("  ·  ") + "  ·  generated " + data.generated;

  // Summary.
  {
    const s = section("Summary", "Each source as read: its ranks, iterations, messages and bytes, and the clock its times are on.");
    s.appendChild(table(["source", "kind", "ranks", "iterations", "median iteration (ms)", "messages", "bytes", "clock"],
      sources.map((x) => [x.label, x.kind, x.ranks, x.iterations_ms.length, fmt(x.median_iteration_ms), x.messages, bytes(x.bytes), x.clock]), [7]));
    for (const x of sources) if (x.note) s.appendChild(el("p", { class: "note", text: x.label + ": " + x.note }));
    if (data.comparison) {
      const c = data.comparison;
      s.appendChild(el("p", { text: "Against " + sources[1].label + ": median iteration error " + fmt(c.median_iteration_error_pct, 1) +
        "% (p95 " + fmt(c.p95_iteration_error_pct, 1) + "%) over " + c.iterations + " iterations; message completion p50 " +
        fmt(c.completion_error_p50_pct, 1) + "%; start offset p99 " + fmt(c.start_offset_error_p99_us, 0) + " us." }));
    }
  }

  // Per-iteration time.
  {
    const s = section("Iteration time", "Job-wide time of each iteration, from the end of the one before (the first from its start).");
    const n = Math.max(0, ...sources.map((x) => x.iterations_ms.length));
    const box = chartBox(s, "iteration time (ms) by iteration", sources.reduce((a, x) => a + x.iterations_ms.filter((v) => v !== null).length, 0));
    if (n === 0) box.appendChild(el("p", { class: "note", text: "no iterations found" }));
    else {
      const xs = Array.from({ length: n }, (_, i) => i);
      const series = [{ label: "iteration" }].concat(sources.map((x, i) => ({ label: x.label, stroke: colors[i], width: 2, points: { show: n < 80 } })));
      const d = [xs].concat(sources.map((x) => xs.map((i) => (i < x.iterations_ms.length ? x.iterations_ms[i] : null))));
      new uPlot({ width: width(box), height: 260, series, axes: [{ label: "iteration" }, { label: "ms" }], scales: { x: { time: false } } }, d, box);
    }
  }

  // Throughput heatmap.
  {
    const s = section("Throughput between ranks", "Rate of each sender-to-receiver pair while it had a message in flight (Gb/s): bytes over the time from a message's start to its arrival.");
    const grid = el("div", { class: "grid" });
    s.appendChild(grid);
    for (const x of sources) {
      const h = x.heatmap;
      const cells = h ? h.gbps.flat().filter((v) => v !== -1).length : 0;
      const box = chartBox(grid, x.label + ": sender (rows) to receiver (columns)", cells);
      if (!h) { box.appendChild(el("p", { class: "note", text: "no timings" })); continue; }
      const max = Math.max(1e-9, ...h.gbps.flat());
      // -1: no flow between them; -2: bytes, but no busy time to divide them by.
      const t = el("table", { class: "heat" });
      t.appendChild(el("tr", {}, el("th", { text: "from \\ to" }), ...h.labels.map((l) => el("th", { text: l }))));
      h.gbps.forEach((row, i) => {
        t.appendChild(el("tr", {}, el("th", { text: h.labels[i] }), ...row.map((v) => {
          if (v === -1) return el("td", { class: "cell none", text: "·" });
          if (v < 0) return el("td", { class: "cell none", text: "?", title: "bytes sent, but no time measured to divide them by" });
          const a = 0.12 + 0.88 * (v / max);
          return el("td", { class: "cell", text: fmt(v, 2), style: "background: rgba(47,111,221," + a.toFixed(2) + "); color: " + (a > 0.6 ? "#fff" : "#1d2430") });
        })));
      });
      box.appendChild(t);
    }
  }

  // Stage latency CDFs.
  {
    const s = section("Message stages", "Distribution of each stage of a message: queued in the local stack, on the wire (first to last byte), awaiting the ACK, and end to end (the sender's start to the receiver's last read). Log scale: a stage of no measurable length (a message in one segment is on the wire for no time) is drawn at 1 ns.");
    const grid = el("div", { class: "grid" });
    s.appendChild(grid);
    const names = ["queued in stack", "on the wire", "awaiting ACK", "end to end"];
    for (const name of names) {
      const per = sources.map((x) => (x.stages_us[name] || []).map((v) => Math.max(v, 0.001)));
      const total = per.reduce((a, v) => a + v.length, 0);
      const box = chartBox(grid, name + " (us): fraction of messages at or below", total);
      if (total === 0) { box.appendChild(el("p", { class: "note", text: "not measured in these sources (no wire tap or transmit timestamps)" })); continue; }
      const lo = Math.min(...per.filter((v) => v.length).map((v) => v[0])), hi = Math.max(...per.filter((v) => v.length).map((v) => v[v.length - 1]));
      const k = 200, xs = [];
      for (let i = 0; i < k; i++) xs.push(lo * Math.pow(hi / lo || 1, i / (k - 1)));
      const ys = per.map((v) => xs.map((x) => {
        if (!v.length) return null;
        let a = 0, b = v.length;
        while (a < b) { const m = (a + b) >> 1; if (v[m] <= x) a = m + 1; else b = m; }
        return a / v.length;
      }));
      new uPlot({ width: width(box), height: 240, scales: { x: { time: false, distr: 3 }, y: { range: [0, 1] } },
        axes: [{ label: "us" }, { label: "fraction" }],
        series: [{ label: "us" }].concat(sources.map((x, i) => ({ label: x.label, stroke: colors[i], width: 2 }))) }, [xs].concat(ys), box);
    }
  }

  // One iteration as a timeline.
  {
    const s = section("One iteration", "The median iteration of each source (from its first start on any rank to the next one's) as a timeline: per rank its compute, and per connection or flow its messages with their stages (queued in stack, on the wire, awaiting ACK) and the receiver's reads. `tensorwire view` writes every iteration for Perfetto.");
    const kinds = { compute: "#2a9d6f", message: "#9fb9e8", "queued in stack": "#c9a227", "on the wire": "#2f6fdd", "awaiting ACK": "#9b59b6", read: "#e0603a" };
    for (const x of sources) {
      const t = x.timeline;
      const box = chartBox(s, x.label + ": one iteration" + (t ? " (iteration " + t.iteration + ", " + fmt(t.iteration_us / 1e3) + " ms)" : ""), t ? t.items.length : 0);
      if (!t) { box.appendChild(el("p", { class: "note", text: "no iterations" })); continue; }
      box.appendChild(el("div", { class: "legend" }, ...Object.entries(kinds).map(([n, c]) => el("span", {}, el("i", { style: "background:" + c }), document.createTextNode(n)))));
      const label = 230, rowH = 16, w = Math.max(480, Math.floor(box.getBoundingClientRect().width) - 24);
      const canvas = el("canvas");
      const dpr = window.devicePixelRatio || 1;
      const h = t.rows.length * rowH + 24;
      canvas.width = w * dpr; canvas.height = h * dpr;
      canvas.style.width = w + "px"; canvas.style.height = h + "px";
      box.appendChild(canvas);
      const g = canvas.getContext("2d");
      g.scale(dpr, dpr);
      g.font = "11px system-ui, sans-serif";
      const span = Math.max(t.iteration_us, 1e-3), plot = w - label - 8;
      const xAt = (us) => label + (us / span) * plot;
      t.rows.forEach((r, i) => {
        g.fillStyle = i % 2 ? "#ffffff" : "#f5f7fa";
        g.fillRect(0, i * rowH, w, rowH);
        g.fillStyle = "#1d2430";
        g.fillText(r.length > 38 ? r.slice(0, 37) + "…" : r, 4, i * rowH + 12);
      });
      for (const [row, b, e, kind] of t.items) {
        const isStage = kind !== "compute" && kind !== "message" && kind !== "read";
        g.fillStyle = kinds[kind] || "#888";
        const y = row * rowH + (isStage ? 5 : 2), hh = isStage ? 7 : rowH - 4;
        g.fillRect(xAt(b), y, Math.max(1, xAt(e) - xAt(b)), hh);
      }
      g.fillStyle = "#5b6575";
      for (let k = 0; k <= 4; k++) {
        const us = (span * k) / 4;
        g.fillText(fmt(us / 1e3) + " ms", Math.min(xAt(us), w - 50), t.rows.length * rowH + 16);
      }
    }
  }

  // Time breakdown per rank.
  {
    const s = section("Where each rank's time went", "Mean per iteration: computing (its compute ops, overlaps counted once), sending (a message of its own in flight, from its start to its arrival, while not computing), and neither (waiting for data or for the others).");
    const parts = [["compute_ms", "compute", colors[2]], ["sending_ms", "sending", colors[0]], ["waiting_ms", "waiting", colors[1]]];
    const grid = el("div", { class: "grid" });
    s.appendChild(grid);
    for (const x of sources) {
      const b = x.breakdown;
      const box = chartBox(grid, x.label + ": ms per iteration", b ? b.ranks.length : 0);
      if (!b) { box.appendChild(el("p", { class: "note", text: "no timings" })); continue; }
      box.appendChild(el("div", { class: "legend" }, ...parts.map(([, n, c]) => el("span", {}, el("i", { style: "background:" + c }), document.createTextNode(n)))));
      const totals = b.ranks.map((_, r) => parts.reduce((a, [k]) => a + b[k][r], 0));
      const max = Math.max(1e-9, ...totals);
      const bars = el("div", { class: "bars" });
      b.ranks.forEach((name, r) => {
        const bar = el("div", { class: "bar" }, ...parts.map(([k, n, c]) =>
          el("span", { style: "width:" + (100 * b[k][r] / max).toFixed(2) + "%;background:" + c, title: n + ": " + fmt(b[k][r]) + " ms" })));
        bars.appendChild(el("div", { class: "row" }, el("div", { class: "name", text: name }), bar, el("div", { class: "total", text: fmt(totals[r]) + " ms" })));
      });
      box.appendChild(bars);
    }
  }

  // Message sizes.
  {
    const s = section("Message sizes", "How many messages of each size (powers of two), over everything the source holds.");
    const grid = el("div", { class: "grid" });
    s.appendChild(grid);
    for (const [i, x] of sources.entries()) {
      const z = x.sizes;
      const box = chartBox(grid, x.label + ": messages by size", z.counts.reduce((a, v) => a + v, 0));
      if (!z.counts.length) { box.appendChild(el("p", { class: "note", text: "no messages" })); continue; }
      const xs = z.counts.map((_, k) => k);
      new uPlot({ width: width(box), height: 220, scales: { x: { time: false, range: [-0.5, xs.length - 0.5] } },
        axes: [{ values: (u, ticks) => ticks.map((t) => (Number.isInteger(t) && z.bins[t] ? z.bins[t] : "")), space: 60 }, { label: "messages" }],
        series: [{ label: "size" }, { label: x.label, stroke: colors[i], fill: colors[i] + "55", paths: uPlot.paths.bars({ size: [0.7, 60] }), points: { show: false } }] },
        [xs, z.counts], box);
    }
  }

  // Top flows and messages.
  {
    const s = section("Top flows and messages", "The flows that carried the most bytes, and the messages that took longest end to end.");
    for (const x of sources) {
      const f = chartBox(s, x.label + ": top flows", x.top_flows.length);
      f.appendChild(table(["flow", "from", "to", "messages per iteration", "bytes", "Gb/s"],
        x.top_flows.map((r) => [r.flow, r.from, r.to, r.messages_per_iteration, bytes(r.bytes), fmt(r.gbps, 2)])));
      const m = chartBox(s, x.label + ": slowest messages", x.top_messages.length);
      m.appendChild(table(["message", "on", "iteration", "bytes", "end to end (us)"],
        x.top_messages.map((r) => [r.message, r.on, r.iteration < 0 ? "–" : r.iteration, bytes(r.bytes), fmt(r.end_to_end_us, 1)]), [1]));
    }
  }

  // Analysis.
  {
    const s = section("Analysis", "Stragglers, slow links and what each costs per iteration, the critical path, the verdict and what to compress (tensorwire analyze; docs/analysis.md).");
    const a = data.analysis;
    if (!a) {
      s.appendChild(el("p", { class: "note", text: data.analysis_note || "not analysed" }));
    } else {
      const ms = (ns) => fmt(ns / 1e6, 2);
      const pct = (v) => (v >= 0 ? "+" : "") + fmt(v * 100, 1) + "%";
      s.appendChild(el("p", { id: "analysis-summary", text: `iteration time: measured ${ms(a.measured_ns)} ms; the job as measured, simulated ${ms(a.simulated_ns)} ms (${pct(a.sim_error)}, ${a.reproduces ? "reproduces it" : "does NOT reproduce it"}); ideal ${ms(a.ideal_ns)} ms` }));
      const named = [];
      for (const x of a.stragglers) if (x.named) named.push(`rank ${x.rank} (${x.host}) is a straggler: without it ${ms(a.simulated_ns - x.without_ns)} ms per iteration`);
      for (const x of a.links) if (x.named) named.push(`the link ${x.a} - ${x.b} is slow: at the others' rate ${ms(a.simulated_ns - x.without_ns)} ms per iteration`);
      s.appendChild(el("p", { id: "analysis-named", class: named.length ? "" : "note", text: named.length ? named.join("; ") : `no straggler or slow link stands out by ${fmt(a.threshold * 100, 0)}% of the ideal` }));
      const st = chartBox(s, "stragglers: each rank put back to its measured timing", a.stragglers.length);
      st.appendChild(table(["rank", "host", "score", "compute/iter (ms)", "peers' median (ms)", "others waited on it (ms)", "impact (ms)", "without it (ms)", "named"],
        a.stragglers.map((x) => [x.rank, x.host, fmt(x.score, 2), ms(x.compute_ns), ms(x.peers_compute_ns), ms(x.waited_on_ns), ms(x.impact_ns), ms(x.without_ns), x.named ? "yes" : ""]), [1]));
      const lk = chartBox(s, "links: each host pair put back to its measured timing", a.links.length);
      lk.appendChild(table(["pair", "rate (Gb/s)", "others' (Gb/s)", "achieved (Gb/s)", "retransmits", "impact (ms)", "without it (ms)", "named"],
        a.links.map((x) => [`${x.a} - ${x.b}`, fmt(x.rate_bps / 1e9, 2), fmt(x.peers_bps / 1e9, 2), fmt(x.achieved_bps / 1e9, 2),
          x.evidence ? x.evidence.retransmits : "–", ms(x.impact_ns), ms(x.without_ns), x.named ? "yes" : ""]), [0]));
      const c = a.critical_path, v = a.verdict;
      const share = (ns) => fmt((100 * ns) / Math.max(c.length_ns, 1), 0) + "%";
      s.appendChild(el("p", { id: "analysis-path", text: `critical path: ${ms(c.length_ns)} ms per iteration: compute ${share(c.compute_ns)}, network ${share(c.network_ns)}, receipt ${share(c.receipt_ns)}, gaps ${share(c.gap_ns)}. Verdict: ${v.bound}-bound (compute ${fmt(v.compute_share * 100, 0)}%, communication ${fmt(v.communication_share * 100, 0)}%); with messages taking no time ${ms(v.no_network_ns)} ms, with compute taking no time ${ms(v.no_compute_ns)} ms.` }));
      const cp = chartBox(s, `compression: saving per iteration (ms) at a cost of ${fmt(a.compression.ns_per_byte, 2)} ns per byte`, a.compression.tensors.length);
      cp.appendChild(table(["tensor", "bytes", "messages"].concat(a.compression.factors.map((k) => `${k}x`)),
        a.compression.tensors.map((x) => [x.tensor, bytes(x.bytes), x.messages].concat(x.saving_ns.map(ms))), [0]));
    }
  }
  document.body.setAttribute("data-ready", "1");
})();

// What the report and the dashboard share: the series colours, building
// elements (text always as text, never as HTML), numbers as text, and a titled
// section.
window.twPage = (function () {
  "use strict";
  const colors = ["#2f6fdd", "#e0603a", "#2a9d6f", "#9b59b6", "#c9a227", "#4a4f5a", "#d64d8a", "#3aa9c9"];
  const el = (tag, attrs, ...kids) => {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "text") e.textContent = v; else e.setAttribute(k, v);
    }
    for (const k of kids) if (k) e.appendChild(k);
    return e;
  };
  const fmt = (x, d = 2) => (x === null || x === undefined || Number.isNaN(x) ? "–" : Number(x).toFixed(d));
  const section = (parent, title, what) => {
    const s = el("section", {}, el("h2", { text: title }), what ? el("p", { class: "what", text: what }) : null);
    parent.appendChild(s);
    return s;
  };
  return { colors, el, fmt, section };
})();

// Loads a page in Debian's Chromium (headless, driven by playwright-core) and
// checks what a person would: it loads with no console error and no failed
// script, fetches nothing beyond itself (or, for the dashboard, its own server),
// and every chart on it has data. Prints a JSON summary; exits 1 on a problem.
//
//   node page_check.cjs MODULES_DIR URL [--allow-origin ORIGIN] [--screenshot PNG]
//        [--wait-state COND] [--kill-agent RANK --then-state COND] [--timeout-ms N]
//
// The page is ready when its body has data-ready="1". --wait-state waits until the
// page's window.twState() meets COND ("iterations>=5", "state=failed",
// "failed_agents>=1"); the pages forbid eval (their CSP), so conditions are
// checked by fixed code, not evaluated. --kill-agent kills that rank's agent (its
// pid as the page shows it) and --then-state waits for the page to show it.
"use strict";
const path = require("path");
const fs = require("fs");
const os = require("os");

const args = process.argv.slice(2);
if (args.length < 2) {
  console.error("usage: node page_check.cjs MODULES_DIR URL [--allow-origin ORIGIN] [--screenshot PNG] [--wait-for EXPR] [--timeout-ms N]");
  process.exit(2);
}
const { chromium } = require(path.resolve(args[0], "playwright-core"));
const url = args[1];
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i < 0 ? dflt : args[i + 1];
};
const allowOrigin = opt("--allow-origin", null);
const screenshot = opt("--screenshot", null);
// --chart-shot TITLE PNG: a picture of the first chart whose title starts with TITLE.
const chartShot = args.indexOf("--chart-shot") >= 0 ? args.slice(args.indexOf("--chart-shot") + 1, args.indexOf("--chart-shot") + 3) : null;
const waitState = opt("--wait-state", null);
const killRank = opt("--kill-agent", null);
const thenState = opt("--then-state", null);
const timeout = Number(opt("--timeout-ms", "30000"));

// "field>=N", "field<=N", "field=V", "field!=V", several joined by "," (all must
// hold) -> [[field, op, value], ...].
const parseCond = (c) => c.split(",").map((one) => {
  const m = /^([a-z_]+)(>=|<=|!=|=)(.*)$/.exec(one);
  if (!m) throw new Error("not a condition: " + one);
  return [m[1], m[2], m[3]];
});
// Runs in the page (a function, so no eval): whether twState() meets them all.
const meets = (conds) => {
  const s = window.twState ? window.twState() : null;
  if (!s) return false;
  return conds.every(([field, op, value]) => {
    const v = s[field];
    if (op === ">=") return Number(v) >= Number(value);
    if (op === "<=") return Number(v) <= Number(value);
    if (op === "=") return String(v) === value;
    return String(v) !== value;
  });
};

(async () => {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), "tw-chromium-"));
  const problems = [];
  const requests = [];
  let browser;
  try {
    // The flags that keep Chromium from reaching out on its own (updates, sync,
    // field trials), and a fresh profile (playwright passes it as --user-data-dir).
    browser = await chromium.launchPersistentContext(profile, {
      executablePath: "/usr/bin/chromium",
      headless: true,
      viewport: { width: 1300, height: 900 },
      args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--disable-quic"],
    });
    const page = browser.pages()[0] || (await browser.newPage());
    page.on("console", (m) => { if (m.type() === "error") problems.push("console error: " + m.text()); });
    page.on("pageerror", (e) => problems.push("script error: " + e.message));
    page.on("requestfailed", (r) => problems.push("request failed: " + r.url()));
    // WebSockets are not requests to playwright: checked apart.
    page.on("websocket", (w) => {
      const u = w.url();
      requests.push(u);
      const http = u.replace(/^ws/, "http");
      if (!(allowOrigin && http.startsWith(allowOrigin + "/"))) problems.push("a WebSocket beyond its own server: " + u.split("?")[0]);
    });
    page.on("request", (r) => {
      const u = r.url();
      requests.push(u);
      const own = u === url || u.split("#")[0] === url.split("#")[0] || (allowOrigin && u.startsWith(allowOrigin + "/")) ||
                  u.startsWith("data:");
      if (!own) problems.push("a request beyond the page: " + u);
    });
    await page.goto(url, { waitUntil: "load", timeout });
    await page.waitForFunction(() => document.body && document.body.getAttribute("data-ready") === "1", null, { timeout });
    if (waitState) await page.waitForFunction(meets, parseCond(waitState), { timeout });
    if (killRank !== null) {
      const pid = await page.evaluate((rank) => {
        const a = window.twState().agents.find((x) => String(x.rank) === rank);
        return a ? a.pid : 0;
      }, killRank);
      if (!(pid > 1)) throw new Error("the page shows no agent of rank " + killRank);
      process.kill(pid, "SIGKILL");
      if (thenState) await page.waitForFunction(meets, parseCond(thenState), { timeout });
    }
    const charts = await page.$$eval("[data-chart]", (els) => els.map((e) => ({
      title: e.getAttribute("data-chart"), points: Number(e.getAttribute("data-points")),
      canvases: e.querySelectorAll("canvas").length, rows: e.querySelectorAll("tr").length })));
    for (const c of charts) if (!(c.points > 0)) problems.push("a chart without data: " + c.title);
    const state = await page.evaluate(() => (window.twState ? window.twState() : null));
    if (screenshot) await page.screenshot({ path: screenshot, fullPage: true });
    if (chartShot) {
      const box = await page.$(`[data-chart^="${chartShot[0].replace(/"/g, "")}"]`);
      if (!box) throw new Error("no chart titled " + chartShot[0]);
      await box.screenshot({ path: chartShot[1] });
    }
    console.log(JSON.stringify({ url, charts, requests: requests.length, state, problems }, null, 1));
  } catch (e) {
    problems.push(String(e && e.message ? e.message.split("\n")[0] : e));
    console.log(JSON.stringify({ url, problems }, null, 1));
  } finally {
    if (browser) await browser.close();
    fs.rmSync(profile, { recursive: true, force: true });
  }
  process.exit(problems.length ? 1 : 0);
})();

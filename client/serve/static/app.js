// slidewin's dashboard: one EventSource on /api/v1/live for the view chosen above; a snapshot
// first, then updates that add, change or remove rows of each series and replace the tables
// that changed. EventSource reconnects by itself and sends the last event id it saw, so the
// server replays what was missed (or sends a new snapshot). No build step, no network beyond
// this server: the chart library is served from /static/vendor.
"use strict";

(function () {
  const $ = (id) => document.getElementById(id);
  const state = { seq: 0, series: {}, start: {}, parts: {}, view: null };
  const live = { status: "connecting", snapshots: 0, updates: 0, errors: 0, lastEventAt: 0 };
  const charts = {};
  let source = null;
  let retryTimer = null;
  const deadPage = { before: null, stack: [] }; // stack: the pages' "before" ids, newest first
  let wantedMeasure = null; // a measure the address asked for, until the stream's are known
  let chosenJoin = null; // the join whose results are listed, once chosen (else the server's)

  window.slidewin = { state, live, charts, reconnect: () => connect() };

  // -- formatting -----------------------------------------------------------------------------
  const num = (v, digits = 0) => (v === null || v === undefined) ? "–" :
    Number(v).toLocaleString("en-US", { maximumFractionDigits: digits });
  const secs = (v) => (v === null || v === undefined) ? "–" :
    (Math.abs(v) >= 100 ? num(v, 0) : num(v, 2)) + " s";
  const time = (iso) => iso ? iso.replace("T", " ").replace(/\.\d+/, "").replace("+00:00", "") : "–";
  const bytes = (b) => b >= 1 << 20 ? num(b / (1 << 20), 1) + " MB" : num(b / 1024, 0) + " kB";
  const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c]));

  // -- charts -----------------------------------------------------------------------------------
  const COLORS = { a: "#2563eb", b: "#dc2626", c: "#16a34a", d: "#9333ea" };

  const fromZero = { range: (u, min, max) => [0, max > 0 ? max * 1.1 : 1] };
  // one point (or all at one x) gives no span: uPlot then adds a day in milliseconds -- our
  // x is in seconds, so the axis would run over years; show a minute around the point instead
  const HALF_SPAN_S = 30;
  const xRange = (u, min, max) => {
    const xs = u.data[0] || [];
    if (xs.length && xs[0] === xs[xs.length - 1]) return [xs[0] - HALF_SPAN_S, xs[0] + HALF_SPAN_S];
    return [min, max];
  };

  function makeChart(name, series, axes, scales = {}) {
    const el = $("chart-" + name);
    const opts = {
      width: Math.max(el.clientWidth, 300), height: 230,
      scales: Object.assign({ x: { time: true, range: xRange } }, scales),
      series: [{}].concat(series),
      axes: [{}].concat(axes),
      legend: { live: true },
      cursor: { drag: { x: false, y: false } },
    };
    const empty = [[]].concat(series.map(() => []));
    charts[name] = new uPlot(opts, empty, el);
  }

  function line(label, color, scale = "y", extra = {}) {
    return Object.assign({ label, stroke: color, width: 1.5, scale, spanGaps: false,
      value: (u, v) => v === null || v === undefined ? "–" : num(v, 2) }, extra);
  }

  function setupCharts() {
    makeChart("ingest", [
      line("accepted /s", COLORS.a),
      line("dead letters /s", COLORS.b, "dl"),
    ], [{ label: "events/s" }, { scale: "dl", side: 1, grid: { show: false }, label: "dead letters/s" }],
    { y: fromZero, dl: fromZero });
    makeChart("freshness", [
      line("newest event's age at commit", COLORS.a, "y", { width: 0, points: { show: true, size: 4 }, spanGaps: true }),
      line("batch time", COLORS.d, "y", { width: 0, points: { show: true, size: 3 }, spanGaps: true }),
      line("now − newest event", COLORS.c, "y", { spanGaps: true }),
      line("retention behind history", COLORS.b, "y", { spanGaps: true }),
    ], [{ label: "seconds" }], { y: fromZero });
    makeChart("live", [
      line("avg", COLORS.a),
      line("max", COLORS.b),
    ], [{}]);
    makeChart("window", [
      line("avg", COLORS.a),
      line("max", COLORS.b),
      line("n", "#9ca3af", "n", { width: 1, dash: [4, 4] }),
    ], [{}, { scale: "n", side: 1, grid: { show: false }, label: "n" }], { n: fromZero });
    if ("ResizeObserver" in window) {
      new ResizeObserver(() => {
        for (const [name, chart] of Object.entries(charts)) {
          const w = $("chart-" + name).clientWidth;
          if (w > 0 && Math.abs(w - chart.width) > 4) chart.setSize({ width: w, height: 230 });
        }
      }).observe(document.querySelector(".grid"));
    }
  }

  function rows(name) {
    const map = state.series[name] || new Map();
    const start = state.start[name];
    const out = [];
    for (const row of map.values()) if (start === undefined || row[0] >= start) out.push(row);
    out.sort((p, q) => p[0] - q[0]);
    return out;
  }

  function columns(list, indexes) {
    return [list.map((r) => r[0])].concat(indexes.map((i) => list.map((r) => r[i])));
  }

  function drawCharts() {
    charts.ingest.setData(columns(rows("ingest"), [1, 2]));
    const fresh = columns(rows("freshness"), [1, 2]);
    const lag = columns(rows("lag"), [1, 2]);
    charts.freshness.setData(fresh[0].length && lag[0].length ? uPlot.join([fresh, lag])
      : fresh[0].length ? [fresh[0], fresh[1], fresh[2], fresh[0].map(() => null), fresh[0].map(() => null)]
      : [lag[0], lag[0].map(() => null), lag[0].map(() => null), lag[1], lag[2]]);
    charts.live.setData(columns(rows("live"), [1, 2]));
    charts.window.setData(columns(rows("window"), [1, 2, 3]));
  }

  // -- tables and figures -----------------------------------------------------------------------
  function drawParts() {
    const p = state.parts;
    const g = p.gauges || {};
    const gauges = [
      ["stream time", time(g.stream_time)],
      ["complete up to", time(g.complete_up_to)],
      ["newest event's age", secs(g.freshness_s)],
      ["events held", num(g.rows)],
      ["retention behind history", g.history_s === null || g.history_s === undefined ? "no history" : secs(g.retention_lag_s)],
      ["late in range", num(g.late_in_range)],
    ];
    $("gauges").innerHTML = gauges.map(([k, v]) =>
      `<div class="gauge"><b>${esc(v)}</b><span>${esc(k)}</span></div>`).join("");

    const parts = p.partitions || [];
    const most = Math.max(1, ...parts.map((r) => r.rows));
    $("partitions").tBodies[0].innerHTML = parts.map((r) => `<tr>
      <td>${r.part === null ? esc(state.view ? state.view.stream : "") : r.part}</td>
      <td class="num">${num(r.rows)}</td>
      <td style="width:25%"><div class="bar" style="width:${(100 * r.rows / most).toFixed(1)}%"></div></td>
      <td>${time(r.oldest)}</td><td>${time(r.newest)}</td><td class="num">${bytes(r.bytes || 0)}</td>
      <td class="num">${r.age_over_s === null || r.age_over_s === undefined ? "–" : r.age_over_s <= 0 ? "on time" : secs(r.age_over_s)}</td></tr>`).join("");

    if (deadPage.before === null) drawDeadLetters(p.dead_letters);

    const defs = (p.sessions && p.sessions.sessions) || [];
    $("sessions-card").hidden = defs.length === 0;
    $("sessions").tBodies[0].innerHTML = defs.map((s) => `<tr><td>${esc(s.name)}</td>
      <td>${secs(s.gap_s)}</td><td class="num">${num(s.open)}</td><td class="num">${num(s.sessions_created)}</td>
      <td class="num">${num(s.merges)}</td><td class="num">${num(s.late)}</td>
      <td>${s.longest_s === null ? "–" : secs(s.longest_s) + " (" + esc(s.longest_key) + ")"}</td></tr>`).join("");

    drawKeys(p);
    const joins = (p.joins && p.joins.joins) || [];
    drawJoinResults(p.join_results, joins);
    $("joins-card").hidden = joins.length === 0;
    $("joins").tBodies[0].innerHTML = joins.map((j) => `<tr><td>${esc(j.name)}</td>
      <td>${esc(j.kind)} ${esc(j.type)}</td><td>${esc(j.left)} ⋈ ${esc(j.right)}</td>
      <td class="num">${num(j.results.pairs)}</td><td class="num">${num(j.results.left_only)}</td>
      <td class="num">${num(j.results.right_only)}</td>
      <td class="num">${num(Number(j.late.left) + Number(j.late.right))}</td>
      <td>${time(j.complete_up_to)}</td></tr>`).join("");

    const h = p.health;
    if (h) {
      const bad = Object.entries(h.details || {}).filter(([, d]) => !d.isHealthy);
      $("health").textContent = h.isHealthy ? "healthy" : "unhealthy: " + bad.map(([k]) => k).join(", ");
      $("health").className = "badge " + (h.isHealthy ? "ok" : "bad");
      $("health").title = bad.map(([k, d]) => `${k}: ${d.reason || "not healthy"}`).join("\n") || "database, schema and jobs are healthy";
    }
    const problem = p.problem || p.window_problem;
    $("problem").hidden = !problem;
    $("problem").textContent = problem || "";
    const measured = !p.view || p.view.measured !== false; // a stream without a measure: counts
    $("live-card").hidden = !measured;
    $("window-card").hidden = !measured;
    fillStreams(p.streams || []);
  }

  // the key filter: the keys of the stream's newest events to pick from, and what the charts of
  // the key asked for show (an unknown key: empty charts and a note saying so)
  function drawKeys(p) {
    const keys = p.keys || [];
    const list = $("keys");
    if (keys.join("\n") !== Array.from(list.options).map((o) => o.value).join("\n")) {
      list.innerHTML = keys.map((k) => `<option value="${esc(k)}"></option>`).join("");
    }
    $("key-note").hidden = !p.key_note;
    $("key-note").textContent = p.key_note || "";
  }

  const record = (side) => side === null || side === undefined ? "–" :
    Object.entries(side).map(([k, v]) =>
      `${esc(k)}=${esc(v !== null && typeof v === "object" ? JSON.stringify(v) : v)}`).join(" ");

  function drawJoinResults(found, joins) {
    $("join-results-card").hidden = !found;
    if (!found) return;
    const select = $("join");
    const names = joins.map((j) => j.name);
    if (!names.includes(found.join)) names.push(found.join);
    if (names.join("\n") !== Array.from(select.options).map((o) => o.value).join("\n")) {
      select.innerHTML = names.map((n) => `<option value="${esc(n)}">${esc(n)}</option>`).join("");
    }
    select.value = found.join;
    $("join-results-where").textContent = found.problem ? "" :
      `${found.kind} ${found.type}, ${time(found.from)} – ${time(found.to)}` +
      (found.more ? ` (the newest ${found.rows.length})` : "");
    const rows = found.rows || [];
    $("join-results").tBodies[0].innerHTML = rows.length ? rows.map((a) => `<tr>
      <td>${time(a.ts)}</td><td class="record">${record(a.l)}</td><td class="record">${record(a.r)}</td>
      <td>${a.final ? "final" : "open"}</td></tr>`).join("")
      : `<tr><td colspan="4" class="muted">${esc(found.problem ||
          `no results of ${found.join} in the hour up to its streams' newest record`)}</td></tr>`;
  }

  function drawDeadLetters(page) {
    const list = (page && page.dead_letters) || [];
    $("dead-letters").tBodies[0].innerHTML = list.length ? list.map((d) => `<tr>
      <td class="num">${esc(d.id)}</td><td>${time(d.received_at)}</td><td>${esc(d.reason)}</td>
      <td>${esc(d.source)}</td><td class="raw" title="${esc(d.detail || "")}">${esc(d.raw)}${d.raw_chars > d.raw.length ? "…" : ""}</td></tr>`).join("")
      : `<tr><td colspan="5" class="muted">no dead letters</td></tr>`;
    deadPage.next = page ? page.next_before : null;
    $("dl-older").disabled = deadPage.next === null || deadPage.next === undefined;
    $("dl-newest").disabled = deadPage.before === null;
    $("dl-page").textContent = deadPage.before === null ? "live" : `before #${deadPage.before}`;
  }

  async function deadLettersBefore(before) {
    const view = currentView();
    const q = new URLSearchParams({ stream: view.stream, limit: "10" });
    if (before !== null) q.set("before", String(before));
    const res = await fetch("/api/v1/dead-letters?" + q);
    const body = await res.json();
    if (!res.ok) throw new Error(body.error || res.statusText);
    deadPage.before = before;
    drawDeadLetters(body);
  }

  $("dl-older").addEventListener("click", () => {
    if (deadPage.next === null || deadPage.next === undefined) return;
    deadPage.stack.push(deadPage.before);
    deadLettersBefore(deadPage.next).catch(showProblem);
  });
  $("dl-newest").addEventListener("click", () => {
    deadPage.before = null;
    deadPage.stack = [];
    drawDeadLetters(state.parts.dead_letters);
  });

  function fillStreams(list) {
    const select = $("stream");
    const names = list.map((s) => s.name);
    const have = Array.from(select.options).map((o) => o.value);
    if (names.length && names.join() !== have.join()) {
      const chosen = select.value;
      select.innerHTML = names.map((n) => `<option value="${esc(n)}">${esc(n)}</option>`).join("");
      select.value = names.includes(chosen) ? chosen : names[0];
    }
    const stream = list.find((s) => s.name === select.value);
    const measures = stream && !stream.builtin ? stream.measures : [];
    $("measure-label").hidden = measures.length < 2;
    const m = $("measure");
    if (measures.join() !== Array.from(m.options).map((o) => o.value).join()) {
      const chosen = m.value;
      m.innerHTML = measures.map((n) => `<option value="${esc(n)}">${esc(n)}</option>`).join("");
      if (measures.includes(chosen)) m.value = chosen;
      if (wantedMeasure && measures.includes(wantedMeasure)) m.value = wantedMeasure;
      if (measures.length) wantedMeasure = null;
    }
  }

  // -- the live stream --------------------------------------------------------------------------
  function currentView() {
    const kind = $("kind").value;
    const view = { stream: $("stream").value || "events", kind, size: $("size").value.trim() || "10s",
      range: $("range").value };
    if (kind === "hopping") view.advance = $("advance").value.trim() || "5s";
    if (!$("measure-label").hidden && $("measure").value) view.measure = $("measure").value;
    else if (wantedMeasure) view.measure = wantedMeasure;
    const key = $("key").value;
    if (key !== "") view.key = key;
    if (chosenJoin) view.join = chosenJoin;
    return view;
  }

  function setStatus(text, cls) {
    live.status = text;
    $("conn").textContent = text;
    $("conn").className = "badge " + cls;
  }

  function showProblem(err) {
    $("problem").hidden = false;
    $("problem").textContent = String(err && err.message ? err.message : err);
  }

  // a new view: nothing of the previous one stays on screen until its first snapshot
  function clearBoard() {
    state.seq = 0;
    state.series = {};
    state.start = {};
    state.parts = { streams: state.parts.streams };
    state.view = null;
    drawCharts();
    drawParts();
    $("updated").textContent = "";
  }

  function applySnapshot(body) {
    state.seq = body.seq;
    state.series = {};
    for (const [name, list] of Object.entries(body.series)) {
      state.series[name] = new Map(list.map((r) => [r[0], r]));
    }
    state.start = body.start;
    state.parts = body.set;
    state.view = body.set.view || body.view; // the view as read: a declared stream's measure named
    live.snapshots += 1;
  }

  function applyUpdate(body) {
    if (body.seq !== state.seq + 1) return false; // a gap: start again from a snapshot
    state.seq = body.seq;
    if (body.start) state.start = body.start;
    for (const [name, list] of Object.entries(body.upsert || {})) {
      const map = state.series[name] || (state.series[name] = new Map());
      for (const r of list) map.set(r[0], r);
    }
    for (const [name, xs] of Object.entries(body.remove || {})) {
      const map = state.series[name];
      if (map) for (const x of xs) map.delete(x);
    }
    for (const [name, map] of Object.entries(state.series)) {
      const start = state.start[name];
      if (start !== undefined) for (const x of Array.from(map.keys())) if (x < start) map.delete(x);
    }
    Object.assign(state.parts, body.set || {});
    live.updates += 1;
    return true;
  }

  function redraw(at) {
    drawCharts();
    drawParts();
    const v = state.view || {};
    $("window-title").textContent = `${v.kind || ""} windows of ${v.size_s || "?"} s` +
      (v.kind === "hopping" ? ` every ${v.advance_s} s` : "") + ": average, maximum, count" +
      (v.key ? ` of key ${v.key}` : "");
    $("live-title").textContent = "Live: average and maximum per second" +
      (v.key ? ` of key ${v.key}` : "");
    if (at) $("updated").textContent = "updated " + new Date(at * 1000).toLocaleTimeString();
    live.lastEventAt = Date.now();
  }

  function connect() {
    if (source) source.close();
    clearTimeout(retryTimer);
    const q = new URLSearchParams(currentView());
    setStatus("connecting…", "warn");
    source = new EventSource("/api/v1/live?" + q);
    const mine = source;
    source.addEventListener("open", () => { if (source === mine) setStatus("live", "ok"); });
    source.addEventListener("snapshot", (e) => {
      if (source !== mine) return;
      applySnapshot(JSON.parse(e.data));
      setStatus("live", "ok");
      redraw(JSON.parse(e.data).at);
    });
    source.addEventListener("update", (e) => {
      if (source !== mine) return;
      const body = JSON.parse(e.data);
      if (!applyUpdate(body)) { connect(); return; }
      setStatus("live", "ok");
      redraw(body.at);
    });
    source.addEventListener("error", () => {
      if (source !== mine) return;
      live.errors += 1;
      if (source.readyState === EventSource.CLOSED) {
        // the server refused the view (a bad size, a stream dropped) or is gone: ask why, retry
        setStatus("offline, retrying…", "bad");
        fetch("/api/v1/dashboard?" + q).then((r) => r.json()).then((b) => {
          if (b.error) showProblem(b.error);
        }).catch(() => {});
        // the stream list never waits on a view that works: the user can choose another
        fetch("/api/v1/streams").then((r) => r.json()).then((b) => {
          if (b.streams) fillStreams(b.streams);
        }).catch(() => {});
        retryTimer = setTimeout(connect, 3000);
      } else {
        setStatus("reconnecting…", "warn");
      }
    });
  }

  function viewChanged() {
    $("advance-label").hidden = $("kind").value !== "hopping";
    deadPage.before = null;
    deadPage.stack = [];
    clearBoard(); // and the measures offered become the chosen stream's
    history.replaceState(null, "", "?" + new URLSearchParams(currentView()));
    connect();
  }

  // the address holds the view (?stream=sensors&kind=hopping&size=1m&advance=10s&range=15m&key=s1&join=j)
  function viewFromAddress() {
    const q = new URLSearchParams(location.search);
    const choose = (id, value) => {
      if (!value) return;
      const select = $(id);
      if (select.tagName === "SELECT" && !Array.from(select.options).some((o) => o.value === value)) {
        select.add(new Option(value, value));
      }
      select.value = value;
    };
    choose("stream", q.get("stream"));
    choose("kind", q.get("kind"));
    choose("size", q.get("size"));
    choose("advance", q.get("advance"));
    choose("range", q.get("range"));
    $("key").value = q.get("key") || "";
    chosenJoin = q.get("join") || null;
    wantedMeasure = q.get("measure");
    $("advance-label").hidden = $("kind").value !== "hopping";
  }

  for (const id of ["measure", "kind", "range"]) $(id).addEventListener("change", viewChanged);
  // another stream's keys are not this one's: the key filter starts empty on a new stream
  $("stream").addEventListener("change", () => { $("key").value = ""; viewChanged(); });
  for (const id of ["size", "advance", "key"]) $(id).addEventListener("change", viewChanged);
  $("join").addEventListener("change", () => { chosenJoin = $("join").value; viewChanged(); });
  $("view").addEventListener("submit", (e) => { e.preventDefault(); viewChanged(); });

  viewFromAddress();
  setupCharts();
  connect();
})();

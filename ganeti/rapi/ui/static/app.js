"use strict";
// The Ganeti web console: plain JavaScript, no build step, no third-party code.
// Data: RAPI's resources under /ui/api/ and the server-sent events of /ui/events
// (nodes, instances, jobs) and /ui/jobs/ID/events (a job's log).  The page never polls.
// Text from the cluster is always set as text (textContent), never parsed as HTML.

const S = {
  session: null,           // {user, write, csrf}
  info: null,              // /2/info
  nodes: new Map(), instances: new Map(), jobs: new Map(),
  rebooted: new Set(),     // nodes whose boot id changed while this page was open
  live: false, error: null,
  sort: {instances: ["name", 1], nodes: ["name", 1], jobs: ["id", -1]},
  filter: {instances: "", instanceState: "", jobState: ""},
  jobStream: null,
  console: null,           // the open console's WebSocket
  vnc: null,               // the open VNC console (noVNC's RFB)
  metrics: new Map(),      // node -> [{t, cpu, mem, mem_used, mem_total}] sampled from MonD by RAPI
};
const METRICS_KEEP = 120;
S.verify = null;           // the last gnt-cluster verify run (/ui/verify)

// --- helpers ---------------------------------------------------------------------
function h(tag, props, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") el.className = v;
    else if (k === "text") el.textContent = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}
const $ = (id) => document.getElementById(id);
const fmtTime = (t) => (t ? new Date(t * 1000).toLocaleString() : "");
const fmtMiB = (m) => (m === null || m === undefined ? "?" : m >= 1024 ? (m / 1024).toFixed(1) + " GiB" : m + " MiB");
function ago(t) {
  if (!t) return "";
  const s = Math.max(0, Date.now() / 1000 - t);
  if (s < 90) return Math.round(s) + " s ago";
  if (s < 5400) return Math.round(s / 60) + " min ago";
  if (s < 129600) return Math.round(s / 3600) + " h ago";
  return Math.round(s / 86400) + " d ago";
}
const state = (text, cls) => h("span", {class: "state " + (cls || text || ""), text: text || "?"});
function usage(total, free) {
  if (!total) return h("span", {class: "muted", text: "?"});
  const used = total - (free || 0);
  const bar = h("span", {class: "bar"}, h("span"));
  bar.firstChild.style.width = Math.min(100, Math.round((100 * used) / total)) + "%";
  return h("span", {}, bar, fmtMiB(used) + " / " + fmtMiB(total));
}
const link = (href, text) => h("a", {href, text});

async function api(method, path, body) {
  const headers = {"Accept": "application/json"};
  if (method !== "GET") headers["X-CSRF-Token"] = S.session ? S.session.csrf : "";
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const r = await fetch("/ui/api" + path, {method, headers, credentials: "same-origin",
                                           body: body === undefined ? undefined : JSON.stringify(body)});
  if (r.status === 401) { location.href = "/ui/login"; throw new Error("not logged in"); }
  const data = await r.json().catch(() => null);
  if (!r.ok) throw new Error((data && data.message) || r.status + " " + r.statusText);
  return data;
}
async function getJSON(path) {
  const r = await fetch(path, {credentials: "same-origin"});
  if (r.status === 401) { location.href = "/ui/login"; throw new Error("not logged in"); }
  if (!r.ok) throw new Error(r.status + " " + r.statusText);
  return r.json();
}
function banner(text) {
  const b = $("banner");
  b.textContent = text || "";
  b.classList.toggle("hidden", !text);
}

// --- live data -------------------------------------------------------------------
const KINDS = {nodes: "name", instances: "name", jobs: "id"};
function applyRows(kind, rows, replace) {
  const map = S[kind];
  if (replace) map.clear();
  for (const row of rows) {
    const old = map.get(row[KINDS[kind]]);
    if (kind === "nodes" && old && old.seen_boot_id && row.seen_boot_id && old.seen_boot_id !== row.seen_boot_id) {
      S.rebooted.add(row.name);
    }
    map.set(row[KINDS[kind]], row);
  }
}
function connect() {
  const es = new EventSource("/ui/events");
  es.addEventListener("open", () => { S.live = true; liveDot(); });
  es.addEventListener("error", () => { S.live = false; liveDot(); });
  es.addEventListener("snapshot", (e) => {
    const d = JSON.parse(e.data);
    for (const kind of Object.keys(KINDS)) applyRows(kind, d[kind] || [], true);
    if (d.metrics) S.metrics = new Map(Object.entries(d.metrics));
    refresh();
    loadVerify();
  });
  es.addEventListener("metrics", (e) => {
    for (const [name, sample] of Object.entries(JSON.parse(e.data))) {
      const list = S.metrics.get(name) || [];
      list.push(sample);
      if (list.length > METRICS_KEEP) list.splice(0, list.length - METRICS_KEEP);
      S.metrics.set(name, list);
    }
    refresh();
  });
  for (const kind of Object.keys(KINDS)) {
    es.addEventListener(kind, (e) => {
      const d = JSON.parse(e.data);
      if (kind === "jobs" && (d.changed || []).some(isVerifyJobDone)) loadVerify();
      applyRows(kind, d.changed || [], false);
      for (const key of d.removed || []) S[kind].delete(key);
      refresh(kind);
    });
  }
  // a server-side "error" event (LuxiD unreachable) differs from the EventSource's own error
  es.addEventListener("error", (e) => { if (e.data) { S.error = JSON.parse(e.data).message; banner(S.error); } });
}
// a verify job (the run or one of its config and group jobs) that has just ended
const isVerifyJobDone = (j) => ["success", "error", "canceled"].includes(j.status) &&
  (j.summary || []).some((x) => /^CLUSTER_VERIFY(_CONFIG|_GROUP)?(\(|$)/.test(x));
function loadVerify() {
  getJSON("/ui/verify").then((v) => { S.verify = v; refresh(); }).catch((err) => { S.verify = {error: err.message}; refresh(); });
}
function liveDot() { $("live").className = "dot " + (S.live ? "on" : "off"); }

// --- routing ---------------------------------------------------------------------
let current = null;  // {view, arg}
function route() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  const views = {"": overview, instances, instance, jobs, job, nodes, node, console: instanceConsole, vnc: instanceVnc};
  const view = views[parts[0]] || overview;
  if (S.jobStream && !(view === job)) { S.jobStream.close(); S.jobStream = null; }
  if (S.console) { S.console.close(); S.console = null; }
  if (S.vnc) { S.vnc.disconnect(); S.vnc = null; }
  current = {view, arg: parts[1]};
  for (const a of document.querySelectorAll("nav a")) {
    a.classList.toggle("active", a.getAttribute("href").split("/")[1] === parts[0].replace(/^(instance|job|node)$/, "$1s").replace(/^(console|vnc)$/, "instances"));
  }
  render(true);
}
function render(first) {
  const main = $("view");
  const out = current.view(current.arg, first);
  if (out) main.replaceChildren(...[out].flat(Infinity).filter((c) => c !== null && c !== undefined));
}
// live changes re-render list views; detail views update their live parts themselves
function refresh() {
  if (!current) return;
  if (current.view.live) render(false);
  else if (current.view.update) current.view.update(current.arg);
}

// --- charts: inline SVG drawn here from the samples ------------------------------
const SVG = "http://www.w3.org/2000/svg";
function svg(tag, attrs, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, v);
  for (const c of children) if (c) el.append(c);
  return el;
}
// a line of percentages (0-100) over time; gaps where a value is missing
function chart(samples, key, title, id, width = 320, height = 90) {
  const pts = samples.filter((s) => typeof s[key] === "number");
  const box = svg("svg", {viewBox: "0 0 " + width + " " + height, class: "chart", id, role: "img",
                          "aria-label": title, "data-points": String(pts.length)});
  for (const y of [0, 50, 100]) {
    const py = height - 4 - (y / 100) * (height - 8);
    box.append(svg("line", {x1: 28, x2: width, y1: py, y2: py, class: "grid"}),
               svg("text", {x: 0, y: py + 4, class: "axis"}, document.createTextNode(y + "%")));
  }
  if (samples.length) {
    const t0 = samples[0].t, t1 = Math.max(samples[samples.length - 1].t, t0 + 1);
    const x = (t) => 30 + ((t - t0) / (t1 - t0)) * (width - 32);
    const y = (v) => height - 4 - (Math.max(0, Math.min(100, v)) / 100) * (height - 8);
    let line = [];
    const lines = [];
    for (const s of samples) {
      if (typeof s[key] !== "number") { if (line.length) lines.push(line); line = []; continue; }
      line.push(x(s.t).toFixed(1) + "," + y(s[key]).toFixed(1));
    }
    if (line.length) lines.push(line);
    for (const l of lines) box.append(svg("polyline", {points: l.length === 1 ? l[0] + " " + l[0] : l.join(" "), class: "line " + key}));
  }
  const last = pts.length ? pts[pts.length - 1][key].toFixed(1) + "%" : "no data";
  return h("figure", {class: "chart-box"}, h("figcaption", {}, title + ": ", h("strong", {class: "chart-value", text: last})), box);
}
function nodeCharts(name) {
  const samples = S.metrics.get(name) || [];
  const lastMem = [...samples].reverse().find((s) => typeof s.mem === "number");
  return h("div", {class: "card", id: "node-charts"}, h("h2", {text: "Metrics (MonD, last " + samples.length + " samples)"}),
    samples.length ? [chart(samples, "cpu", "CPU load", "chart-cpu"), chart(samples, "mem", "Memory used", "chart-mem"),
      lastMem ? h("p", {class: "muted", text: fmtMiB(lastMem.mem_used) + " of " + fmtMiB(lastMem.mem_total)}) : null]
      : h("p", {class: "muted", text: "No samples from this node's MonD yet."}));
}
// a small line in the node table: the CPU load of the last minutes
function sparkline(name) {
  const samples = (S.metrics.get(name) || []).slice(-36);
  const pts = samples.filter((s) => typeof s.cpu === "number");
  if (!pts.length) return h("span", {class: "muted", text: "–"});
  const box = svg("svg", {viewBox: "0 0 60 16", class: "spark", "aria-hidden": "true"});
  if (pts.length > 1) {
    box.append(svg("polyline", {class: "line cpu", points: pts.map((s, k) =>
      (k * 60 / (pts.length - 1)).toFixed(1) + "," + (15 - Math.min(100, s.cpu) * 0.14).toFixed(1)).join(" ")}));
  }
  return h("span", {class: "spark-cell"}, box, " " + pts[pts.length - 1].cpu.toFixed(0) + "%");
}

// --- views -----------------------------------------------------------------------
function sortedRows(kind, rows) {
  const [key, dir] = S.sort[kind];
  return rows.sort((a, b) => {
    const x = a[key], y = b[key];
    if (x === y) return 0;
    if (x === null || x === undefined) return 1;
    if (y === null || y === undefined) return -1;
    return (x < y ? -1 : 1) * dir;
  });
}
function table(kind, columns, rows, id) {
  const [skey, sdir] = S.sort[kind] || [];
  const head = h("tr", {}, columns.map(([title, key]) => {
    if (!key) return h("th", {text: title});
    return h("th", {class: "sortable" + (skey === key ? (sdir > 0 ? " sorted-asc" : " sorted-desc") : ""), text: title,
                    onclick: () => { S.sort[kind] = [key, skey === key ? -sdir : 1]; render(false); }});
  }));
  return h("div", {class: "scroll"}, h("table", {id}, h("thead", {}, head),
    h("tbody", {}, rows.map((r) => h("tr", {"data-key": r.key}, r.cells.map((c) => h("td", {}, c)))))));
}
function dl(pairs) {
  return h("dl", {}, pairs.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v === null || v === undefined ? "" : v)]));
}
function nodeLiveness(n) {
  const cells = [state(n.liveness || "unknown")];
  if (n.liveness === "unreachable" && n.liveness_since) cells.push(" since " + fmtTime(n.liveness_since));
  if (S.rebooted.has(n.name)) cells.push(" ", state("rebooted"));
  return h("span", {class: "liveness"}, cells);
}
function alerts() {
  const out = [];
  for (const n of S.nodes.values()) {
    if (n.liveness === "unreachable") out.push(["node " + n.name + " is unreachable since " + fmtTime(n.liveness_since), ""]);
    else if (n.offline) out.push(["node " + n.name + " is offline", "warn"]);
    else if (n.drained) out.push(["node " + n.name + " is drained", "warn"]);
    if (S.rebooted.has(n.name)) out.push(["node " + n.name + " rebooted", "warn"]);
  }
  for (const i of S.instances.values()) {
    if (String(i.status || "").startsWith("ERROR")) out.push(["instance " + i.name + ": " + i.status, ""]);
  }
  return out;
}

function overview() {
  const info = S.info || {};
  const lf = info.ha_last_failover;
  const cluster = h("div", {class: "card", id: "cluster"}, h("h2", {text: "Cluster"}), dl([
    ["Name", info.name], ["Master", info.master], ["Master epoch", info.ha_master_epoch],
    ["Automatic failover", info.ha_auto_failover === undefined ? "" : info.ha_auto_failover ? "on" : "off"],
    ["Liveness timeout", info.ha_liveness_timeout !== undefined ? info.ha_liveness_timeout + " s" : ""],
    ["Failover timeout", info.ha_failover_timeout !== undefined ? info.ha_failover_timeout + " s" : ""],
    ["Last failover", lf ? fmtTime(lf.time) + " to " + lf.node + (lf.old_master ? " from " + lf.old_master : "") +
                           " (epoch " + lf.epoch + ")" : "none recorded"],
    ["Version", info.software_version],
  ]));
  const byState = new Map();
  for (const i of S.instances.values()) byState.set(i.status, (byState.get(i.status) || 0) + 1);
  const inst = h("div", {class: "card", id: "instance-states"}, h("h2", {text: "Instances (" + S.instances.size + ")"}),
    dl([...byState.entries()].sort().map(([st, n]) => [state(st), link("#/instances/" + encodeURIComponent(st), String(n))])));
  const jobsAll = [...S.jobs.values()];
  const running = jobsAll.filter((j) => ["running", "queued", "waiting", "canceling"].includes(j.status));
  const failed = jobsAll.filter((j) => j.status === "error").sort((a, b) => b.id - a.id).slice(0, 10);
  const jobList = (list) => list.length ? h("ul", {}, list.map((j) => h("li", {}, link("#/job/" + j.id, "#" + j.id), " ",
    state(j.status), " ", (j.summary || []).join(", ")))) : h("p", {class: "muted", text: "none"});
  const jobsCard = h("div", {class: "card", id: "job-summary"}, h("h2", {text: "Jobs"}),
    h("strong", {text: "Running or pending (" + running.length + ")"}), jobList(running),
    h("strong", {text: "Failed (" + jobsAll.filter((j) => j.status === "error").length + ")"}), jobList(failed));
  const al = alerts();
  const alertCard = h("div", {class: "card", id: "alerts"}, h("h2", {text: "Alerts"}),
    al.length ? h("ul", {class: "alerts"}, al.map(([t, c]) => h("li", {class: c, text: t}))) : h("p", {class: "muted", text: "none"}),
    verifyBox());
  return [h("h1", {text: "Overview"}), h("div", {class: "cards"}, cluster, alertCard, inst, jobsCard),
          h("h2", {text: "Nodes (" + S.nodes.size + ")"}), nodeTable()];
}
overview.live = true;

// the last `gnt-cluster verify` run: its errors and warnings, and (write users) a button to run one
function verifyBox() {
  const v = S.verify;
  let head;
  if (!v) head = h("p", {class: "muted", text: "Reading the last run…"});
  else if (v.error) head = h("p", {class: "alert", text: "Cannot read it: " + v.error});
  else if (v.job === null) head = h("p", {class: "muted", text: "Never run (gnt-cluster verify)."});
  else head = h("p", {}, "Last run ", link("#/job/" + v.job, "#" + v.job), v.time ? " at " + fmtTime(v.time) : "", ": ",
    v.finished ? h("span", {id: "verify-result", class: "state " + (v.errors ? "error" : v.warnings ? "warn" : "success"),
                           text: v.errors + " error(s), " + v.warnings + " warning(s)"})
               : h("span", {id: "verify-result", class: "state running", text: "running"}));
  const list = v && v.alerts && v.alerts.length ? h("ul", {class: "alerts", id: "verify-alerts"},
    v.alerts.map((a) => h("li", {class: a.severity === "warning" ? "warn" : "", text: a.text}))) : null;
  const button = S.session.write ? h("button", {type: "button", id: "verify-now", class: "secondary", text: "Verify now",
    disabled: v && v.job !== null && !v.finished, onclick: async (e) => {
      e.target.disabled = true;
      try {
        const r = await fetch("/ui/verify", {method: "POST", headers: {"X-CSRF-Token": S.session.csrf}, credentials: "same-origin"});
        const d = await r.json();
        if (!r.ok) throw new Error(d.message || r.status);
        S.verify = Object.assign({}, S.verify || {}, {job: d.job, finished: false, time: null, alerts: []});
        refresh();
      } catch (err) { banner("Verify failed: " + err.message); e.target.disabled = false; }
    }}) : null;
  return h("div", {id: "verify"}, h("h3", {text: "Cluster verify"}), head, list, button);
}

function nodeTable() {
  const rows = sortedRows("nodes", [...S.nodes.values()]).map((n) => ({key: n.name, cells: [
    link("#/node/" + encodeURIComponent(n.name), n.name), n.role || "", nodeLiveness(n),
    usage(n.mtotal, n.mfree), usage(n.dtotal, n.dfree), sparkline(n.name), String(n.pinst_cnt ?? ""),
    String(n.sinst_cnt ?? "")]}));
  return table("nodes", [["Name", "name"], ["Role", "role"], ["Liveness", "liveness"], ["Memory used", "mfree"],
                         ["Disk used", "dfree"], ["CPU", null], ["Primary", "pinst_cnt"], ["Secondary", "sinst_cnt"]],
               rows, "nodes");
}
function nodes() { return [h("h1", {text: "Nodes"}), nodeTable()]; }
nodes.live = true;

function instancesTable() {
  const q = S.filter.instances.toLowerCase(), st = S.filter.instanceState;
  const all = [...S.instances.values()];
  const rows = sortedRows("instances", all.filter((i) => (!st || i.status === st) &&
      (!q || [i.name, i.pnode, i.os, ...(i.tags || [])].some((v) => String(v || "").toLowerCase().includes(q)))))
    .map((i) => ({key: i.name, cells: [link("#/instance/" + encodeURIComponent(i.name), i.name), state(i.status),
      i.pnode || "", (i.snodes || []).join(", "), i.os || "", i.disk_template || "", String(i["be/vcpus"] ?? ""),
      fmtMiB(i["be/maxmem"])]}));
  return [h("p", {class: "muted", text: rows.length + " of " + all.length}),
          table("instances", [["Name", "name"], ["Status", "status"], ["Primary node", "pnode"], ["Secondary", null],
                              ["OS", "os"], ["Disks", "disk_template"], ["VCPUs", "be/vcpus"], ["Memory", "be/maxmem"]],
                rows, "instances")];
}
// the toolbar stays (the filter keeps its focus while changes arrive); only the table is redrawn
function instances(wanted, first) {
  if (first && wanted !== undefined) S.filter.instanceState = wanted;
  const states = [...new Set([...S.instances.values()].map((i) => i.status))].sort();
  const st = S.filter.instanceState;
  const filterBox = h("input", {id: "instance-filter", type: "search", placeholder: "Filter: name, node, OS, tag",
                                value: S.filter.instances,
                                oninput: (e) => { S.filter.instances = e.target.value; instances.update(); }});
  const select = h("select", {id: "instance-state", onchange: (e) => { S.filter.instanceState = e.target.value; instances.update(); }},
    h("option", {value: "", text: "any state"}), states.map((s) => h("option", {value: s, text: s, selected: s === st})));
  return [h("h1", {text: "Instances"}), h("div", {class: "toolbar"}, filterBox, select),
          h("div", {id: "instances-holder"}, instancesTable())];
}
instances.update = () => { const el = $("instances-holder"); if (el) el.replaceChildren(...instancesTable().flat()); };

// actions with an in-page confirmation; each submits the usual RAPI job, then shows it.
// An action with a target (migrate, fail over) lets the user pick the node in the confirmation.
function actionBar(target, actions) {
  if (!S.session.write) return null;
  const box = h("div", {class: "confirm hidden", id: "confirm"});
  const bar = h("div", {class: "toolbar", id: "actions"}, actions.map(([label, method, path, body, danger, targets]) =>
    h("button", {type: "button", class: danger ? "danger" : "", "data-action": label, onclick: () => {
      const picker = targets ? h("select", {id: "confirm-target"}, targets().map((n) => h("option", {value: n, text: n})),
                                 h("option", {value: "", text: "(the default allocator)"})) : null;
      box.replaceChildren(h("span", {text: label + " " + target + (picker ? " to " : "? ")}), picker, picker ? "? " : null,
        h("button", {type: "button", id: "confirm-yes", class: danger ? "danger" : "", text: "Yes, " + label.toLowerCase(),
          onclick: async () => {
            box.classList.add("hidden");
            const sent = picker && picker.value ? Object.assign({}, body, {target_node: picker.value}) : body;
            try {
              const jobId = await api(method, path, sent);
              location.hash = "#/job/" + (Array.isArray(jobId) ? jobId[0] : jobId);
            } catch (err) { banner(label + " failed: " + err.message); }
          }}), " ",
        h("button", {type: "button", class: "secondary", text: "Cancel", onclick: () => box.classList.add("hidden")}));
      box.classList.remove("hidden");
    }, text: label})));
  return [bar, box];
}

function instance(name) {
  const p = "/2/instances/" + encodeURIComponent(name);
  const holder = h("div", {id: "instance-detail"}, h("p", {class: "muted", text: "Loading…"}));
  api("GET", p).then((i) => {
    i.hypervisor = i.hypervisor || (S.instances.get(name) || {}).hypervisor;  // not in RAPI's fields: the live row's
    holder.dataset.hv = i.hypervisor || "";  // unknown until the live row comes (a new instance): drawn again then
    const nics = (i["nic.macs"] || []).map((mac, n) => [
      "NIC " + n, [mac, (i["nic.ips"] || [])[n], (i["nic.modes"] || [])[n], (i["nic.links"] || [])[n]].filter(Boolean).join(" ")]);
    const disks = (i["disk.sizes"] || []).map((size, n) => ["Disk " + n, fmtMiB(size)]);
    const params = (o) => Object.entries(o || {}).map(([k, v]) => [k, typeof v === "object" ? JSON.stringify(v) : String(v)]);
    holder.replaceChildren(h("div", {class: "cards"},
      h("div", {class: "card"}, h("h2", {text: "Instance"}), dl([["Status", state(i.status)], ["Primary node", i.pnode],
        ["Secondary nodes", (i.snodes || []).join(", ")], ["OS", i.os], ["Hypervisor", i.hypervisor],
        ["Disk template", i.disk_template], ["Tags", (i.tags || []).join(", ")]].concat(disks, nics))),
      h("div", {class: "card"}, h("h2", {text: "Back-end parameters"}), dl(params(i.beparams))),
      h("div", {class: "card"}, h("h2", {text: "Hypervisor parameters"}), dl(params(i.hvparams)))));
    const hv = i.hvparams || {};
    if (S.session.write && i.hypervisor === "kvm") {
      // kvm describes one console: the VNC display when it has one, else the serial port
      holder.prepend(h("p", {}, hv.vnc_bind_address
        ? h("a", {href: "#/vnc/" + encodeURIComponent(name), id: "open-vnc", class: "button", text: "VNC console"})
        : hv.serial_console === false ? null
        : h("a", {href: "#/console/" + encodeURIComponent(name), id: "open-console", class: "button", text: "Serial console"})));
    }
  }).catch((err) => holder.replaceChildren(h("p", {class: "alert", text: err.message})));
  const others = () => [...S.nodes.values()].filter((n) => n.name !== (S.instances.get(name) || {}).pnode &&
                                                   !n.offline && !n.drained && n.liveness !== "unreachable")
    .map((n) => n.name).sort();
  return [h("h1", {}, name + " ", h("span", {id: "instance-status"}, state((S.instances.get(name) || {}).status))),
    actionBar(name, [
      ["Start", "PUT", p + "/startup", {}], ["Shut down", "PUT", p + "/shutdown", {}],
      ["Reboot", "POST", p + "/reboot", {}], ["Migrate", "PUT", p + "/migrate", {}, false, others],
      ["Fail over", "PUT", p + "/failover", {}, false, others], ["Remove", "DELETE", p, undefined, true]]), holder];
}
// the instance's status in the heading follows the pushed changes
instance.update = (name) => {
  const el = $("instance-status"), i = S.instances.get(name), detail = $("instance-detail");
  if (detail && detail.dataset.hv === "" && i && i.hypervisor) { render(true); return; }  // now its console
  if (el && i) el.replaceChildren(state(i.status));
};

function jobs() {
  const st = S.filter.jobState;
  const all = [...S.jobs.values()];
  const rows = sortedRows("jobs", all.filter((j) => !st || j.status === st)).map((j) => ({key: String(j.id), cells: [
    link("#/job/" + j.id, String(j.id)), state(j.status), h("span", {text: (j.summary || []).join(", ")}),
    fmtTime(j.received_ts), fmtTime(j.end_ts)]}));
  const states = ["queued", "waiting", "running", "canceling", "success", "error", "canceled"];
  return [h("h1", {text: "Jobs"}), h("div", {class: "toolbar"},
    h("select", {id: "job-state", onchange: (e) => { S.filter.jobState = e.target.value; render(false); }},
      h("option", {value: "", text: "any status"}), states.map((s) => h("option", {value: s, text: s, selected: s === st}))),
    h("span", {class: "muted", text: rows.length + " of " + all.length})),
    table("jobs", [["ID", "id"], ["Status", "status"], ["Summary", null], ["Received", "received_ts"], ["Ended", "end_ts"]],
          rows, "jobs")];
}
jobs.live = true;

function job(id) {
  const status = h("span", {id: "job-status"}, state("?"));
  const log = h("pre", {class: "log", id: "job-log"});
  const details = h("div", {});
  const seen = new Set();
  let lastStatus = null;
  const show = () => api("GET", "/2/jobs/" + id).then((j) => {
    status.replaceChildren(state(j.status));
    details.replaceChildren(h("div", {class: "card"}, h("h2", {text: "Opcodes"}),
      h("ol", {}, (j.ops || []).map((op, n) => h("li", {}, h("strong", {text: op.OP_ID}), " ",
        state((j.opstatus || [])[n]), h("pre", {class: "log", text: JSON.stringify((j.opresult || [])[n], null, 1)}))))));
  }).catch((err) => details.replaceChildren(h("p", {class: "alert", text: err.message})));
  show();
  if (S.jobStream) S.jobStream.close();
  const es = new EventSource("/ui/jobs/" + encodeURIComponent(id) + "/events");
  S.jobStream = es;
  es.addEventListener("job", (e) => {
    const d = JSON.parse(e.data);
    if (d.status) status.replaceChildren(state(d.status));
    const bar = $("actions");
    if (bar) bar.classList.toggle("hidden", ["success", "error", "canceled"].includes(d.status));
    if (d.status !== lastStatus) {
      lastStatus = d.status;
      log.append(new Date().toLocaleString() + "  job " + id + " is " + (d.status || "gone") + "\n");
    }
    for (const entry of d.log) {
      if (seen.has(entry.serial)) continue;
      seen.add(entry.serial);
      log.append(fmtTime(entry.time) + "  " + (typeof entry.message === "string" ? entry.message : JSON.stringify(entry.message)) + "\n");
    }
    log.scrollTop = log.scrollHeight;
  });
  es.addEventListener("end", () => { es.close(); show(); });
  const cancel = S.session.write ? actionBar("job " + id, [["Cancel job", "DELETE", "/2/jobs/" + id, undefined, true]]) : null;
  return [h("h1", {}, "Job " + id + " ", status), cancel, h("h2", {text: "Log"}), log, details];
}

function node(name) {
  const p = "/2/nodes/" + encodeURIComponent(name);
  const holder = h("div", {}, h("p", {class: "muted", text: "Loading…"}));
  Promise.all([api("GET", p), getJSON("/ui/nodes/" + encodeURIComponent(name) + "/liveness")]).then(([n, history]) => {
    holder.replaceChildren(h("div", {class: "cards"}, h("div", {class: "card"}, h("h2", {text: "Node"}), dl([
      ["Role", n.role], ["Liveness", state(n.liveness || "unknown")], ["Since", fmtTime(n.liveness_since)],
      ["Last seen", ago(n.last_seen)], ["Boot id", n.seen_boot_id], ["Primary IP", n.pip], ["Secondary IP", n.sip],
      ["Memory", usage(n.mtotal, n.mfree)], ["Disk", usage(n.dtotal, n.dfree)], ["CPUs", n.ctotal],
      ["Primary instances", (n.pinst_list || []).join(", ")], ["Secondary instances", (n.sinst_list || []).join(", ")],
      ["Drained", n.drained ? "yes" : "no"], ["Offline", n.offline ? "yes" : "no"]]))),
      h("h2", {text: "Liveness history"}),
      history.length ? table("history", [["Time"], ["Event"], ["State"], ["Reason"]], history.slice().reverse().map((r, k) => ({
        key: String(k), cells: [fmtTime(r.time), r.event, state(r.state), h("span", {text: r.reason || ""})]})), "liveness-history")
        : h("p", {class: "muted", text: "No recorded changes."}));
  }).catch((err) => holder.replaceChildren(h("p", {class: "alert", text: err.message})));
  const n = S.nodes.get(name) || {};
  return [h("h1", {text: name}), h("div", {id: "charts-holder"}, nodeCharts(name)), actionBar(name, [
    n.drained ? ["Undrain", "POST", p + "/modify", {drained: false}] : ["Drain", "POST", p + "/modify", {drained: true}],
    n.offline ? ["Set online", "POST", p + "/modify", {offline: false}] : ["Set offline", "POST", p + "/modify", {offline: true}, true],
    ["Evacuate", "POST", p + "/evacuate", {mode: "all", iallocator: "hail"}, true]]), holder];
}

// the serial console of a kvm instance: a WebSocket to RAPI, bridged to the instance's
// serial port (ganeti/rapi/ui/console.py); binary messages are the console's bytes,
// text messages the server's status ({"connected"} or {"error"})
function instanceConsole(name) {
  const status = h("span", {id: "console-status", class: "muted", text: "connecting…"});
  const holder = h("div", {class: "terminal-box"});
  const ws = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host +
                           "/ui/instances/" + encodeURIComponent(name) + "/console");
  ws.binaryType = "arraybuffer";
  S.console = ws;
  const encoder = new TextEncoder();
  const term = new GanetiTerminal(holder, (text) => { if (ws.readyState === WebSocket.OPEN) ws.send(encoder.encode(text)); });
  let failed = false;
  ws.addEventListener("message", (e) => {
    if (typeof e.data !== "string") { term.write(e.data); return; }
    const d = JSON.parse(e.data);
    if (d.error) { failed = true; status.textContent = d.error; status.className = "alert"; }
    else if (d.connected) { status.textContent = "connected"; status.className = "state running"; term.input.focus(); }
  });
  ws.addEventListener("close", () => {
    if (!failed) { status.textContent = "disconnected"; status.className = "muted"; }
    if (S.console === ws) S.console = null;
  });
  return [h("h1", {}, "Console of ", link("#/instance/" + encodeURIComponent(name), name), " ", status),
    h("p", {class: "muted", text: "The instance's serial console. Click it and type; leaving the page disconnects."}),
    holder];
}

// the charts follow the pushed samples
node.update = (name) => { const el = $("charts-holder"); if (el) el.replaceChildren(nodeCharts(name)); };

// the VNC display of a kvm instance, in noVNC as Debian packages it (served by RAPI from /usr/share/novnc,
// loaded only when this view opens) over a WebSocket to RAPI, bridged to the instance's VNC port
function instanceVnc(name) {
  const status = h("span", {id: "vnc-status", class: "muted", text: "connecting…"});
  const screen = h("div", {id: "vnc-screen", class: "vnc-screen"});
  const url = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/ui/instances/" +
              encodeURIComponent(name) + "/vnc";
  import("/ui/novnc/core/rfb.js").then(({default: RFB}) => {
    if (!screen.isConnected) return;
    const rfb = new RFB(screen, url, {wsProtocols: ["binary"]});
    S.vnc = rfb;
    rfb.scaleViewport = true;
    rfb.addEventListener("connect", () => { status.textContent = "connected"; status.className = "state running"; });
    rfb.addEventListener("disconnect", (e) => {
      status.textContent = e.detail && e.detail.clean ? "disconnected" : "connection closed";
      status.className = "muted";
      if (S.vnc === rfb) S.vnc = null;
    });
    rfb.addEventListener("desktopname", (e) => { screen.title = e.detail.name; });
  }).catch((err) => { status.textContent = "noVNC is not available (Debian's novnc package): " + err.message;
                      status.className = "alert"; });
  return [h("h1", {}, "VNC console of ", link("#/instance/" + encodeURIComponent(name), name), " ", status),
    h("p", {class: "muted", text: "The instance's display. Click it to type; leaving the page disconnects."}), screen];
}

// --- start -----------------------------------------------------------------------
async function start() {
  S.session = await getJSON("/ui/session");
  $("user").textContent = S.session.user + (S.session.write ? "" : " (read-only)");
  $("logout").addEventListener("click", async () => {
    await fetch("/ui/logout", {method: "POST", headers: {"X-CSRF-Token": S.session.csrf}, credentials: "same-origin"});
    location.href = "/ui/login";
  });
  api("GET", "/2/info").then((info) => {
    S.info = info;
    $("cluster-name").textContent = info.name || "Ganeti";
    document.title = "Ganeti: " + (info.name || "");
    refresh();
  }).catch((err) => banner("Cannot read the cluster's information: " + err.message));
  window.addEventListener("hashchange", route);
  route();
  connect();
}
start().catch((err) => banner(err.message));

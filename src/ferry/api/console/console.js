// ferry's web console: reads the control API every few seconds and draws each flow.
// Everything shown is set as text (never as HTML): topic names and errors print verbatim.
"use strict";

const TOKEN_KEY = "ferry-api-token";
const DONE = { pause: "paused", resume: "resumed", restart: "restarted" };
const REFRESH_MS = 5000;
const SVG = "http://www.w3.org/2000/svg";
const sections = new Map(); // flow name -> its <section>
let timer = null;

function token() { return sessionStorage.getItem(TOKEN_KEY); }

class Unauthorized extends Error {}

async function call(method, path, body) {
  const headers = {};
  if (token()) headers.Authorization = "Bearer " + token();
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch("api/v1" + path, {
    method, headers, body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (response.status === 401) throw new Unauthorized("the API wants a valid token");
  const data = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(data.detail || response.statusText);
  return data;
}

function flowPath(flow) {
  return "/flows/" + encodeURIComponent(flow.source) + "/" + encodeURIComponent(flow.target);
}

function say(text, failed = false) {
  const message = document.getElementById("message");
  message.textContent = text;
  message.classList.toggle("failed", failed);
}

function number(value, unit) {
  if (value === null || value === undefined) return "–";
  return value.toLocaleString(undefined, { maximumFractionDigits: 1 }) + (unit ? " " + unit : "");
}

// A line chart of one series over the points' time span (at most the last hour); every chart
// of a flow spans the same time, whichever of its points have a value.
function drawChart(svg, points, key) {
  const width = 300, height = 120, left = 40, bottom = 14;
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  svg.setAttribute("preserveAspectRatio", "none");
  svg.replaceChildren();
  const data = points.filter((p) => p[key] !== null && p[key] !== undefined);
  svg.dataset.points = String(data.length);
  if (data.length === 0) {
    text(svg, left, height / 2, "no data yet");
    return;
  }
  const t0 = points[0].t, t1 = Math.max(points[points.length - 1].t, t0 + 1);
  const top = Math.max(...data.map((p) => p[key]), 1);
  const x = (t) => left + ((t - t0) / (t1 - t0)) * (width - left - 4);
  const y = (v) => 4 + (1 - v / top) * (height - bottom - 8);
  const line = document.createElementNS(SVG, "polyline");
  line.setAttribute("points", data.map((p) => `${x(p.t).toFixed(1)},${y(p[key]).toFixed(1)}`).join(" "));
  line.setAttribute("vector-effect", "non-scaling-stroke");
  svg.appendChild(line);
  const last = data[data.length - 1];
  const dot = document.createElementNS(SVG, "circle");
  dot.setAttribute("cx", x(last.t)); dot.setAttribute("cy", y(last[key])); dot.setAttribute("r", 2);
  svg.appendChild(dot);
  text(svg, 2, 12, number(top));
  text(svg, 2, height - bottom, "0");
  const minutes = Math.round((t1 - t0) / 60);
  text(svg, left, height - 2, minutes >= 1 ? `−${minutes} min` : `−${Math.round(t1 - t0)} s`);
  text(svg, width - 24, height - 2, "now");
}

function text(svg, x, y, content) {
  const label = document.createElementNS(SVG, "text");
  label.setAttribute("x", x); label.setAttribute("y", y);
  label.textContent = content;
  svg.appendChild(label);
}

function sectionFor(flow) {
  let section = sections.get(flow.name);
  if (section) return section;
  section = document.getElementById("flow-template").content.firstElementChild.cloneNode(true);
  section.dataset.flow = flow.name;
  section.querySelector(".name").textContent = flow.name;
  section.querySelector(".toggle").addEventListener("click", () => {
    const action = section.dataset.action;
    change("POST", flowPath(section.flow) + "/" + action, undefined, `${flow.name}: ${DONE[action]}`);
  });
  section.querySelector(".add-topic").addEventListener("submit", (event) => {
    event.preventDefault();
    const input = event.target.elements.topic;
    change("POST", flowPath(section.flow) + "/topics", { topic: input.value }, `${flow.name}: topic ${input.value} added`)
      .then((ok) => { if (ok) input.value = ""; });
  });
  document.getElementById("flows").appendChild(section);
  sections.set(flow.name, section);
  return section;
}

function showFlow(flow, history) {
  const section = sectionFor(flow);
  section.flow = flow;
  section.dataset.state = flow.state;
  const state = section.querySelector(".state");
  state.textContent = flow.state;
  state.className = "state " + flow.state;
  section.querySelector(".error").textContent = flow.error || "";
  const action = flow.state === "failed" ? "restart" : flow.state === "paused" ? "resume" : "pause";
  section.dataset.action = action;
  section.querySelector(".toggle").textContent = action[0].toUpperCase() + action.slice(1);
  const recent = history.points.length ? history.points[history.points.length - 1] : {};
  section.querySelector(".lag").textContent = number(flow.lag, "records");
  section.querySelector(".latency").textContent = number(flow.latency_ms, "ms");
  section.querySelector(".throughput").textContent =
    number(recent.records_per_second, "records/s") + " · " +
    number(recent.bytes_per_second === undefined || recent.bytes_per_second === null ? null : recent.bytes_per_second / 1e6, "MB/s");
  section.querySelector(".copied").textContent = number(flow.records, "records");
  // Unknown (not read in time, or not measured yet) is said, never shown as 0.
  section.querySelector(".rpo").textContent =
    flow.rpo_seconds === null || flow.rpo_seconds === undefined ? "unknown" : number(flow.rpo_seconds, "s");
  for (const svg of section.querySelectorAll("svg.chart")) drawChart(svg, history.points, svg.dataset.series);
  const list = section.querySelector(".topic-list");
  list.replaceChildren(...flow.topics.map((topic) => {
    const item = document.createElement("li");
    item.append(topic);
    const remove = document.createElement("button");
    remove.type = "button";
    remove.title = "Stop replicating " + topic + " (its copy on the target stays)";
    remove.textContent = "×";
    remove.addEventListener("click", () => change(
      "DELETE", flowPath(flow) + "/topics/" + encodeURIComponent(topic), undefined, `${flow.name}: topic ${topic} removed`));
    item.appendChild(remove);
    return item;
  }));
  // Internal topics (heartbeats) always travel: shown apart, with no remove button.
  const internal = section.querySelector(".internal-topic-list");
  internal.replaceChildren(...(flow.internal_topics || []).map((topic) => {
    const item = document.createElement("li");
    item.append(topic);
    item.title = topic + " always travels: it measures the flow's latency";
    return item;
  }));
  section.querySelector(".internal-topics").hidden = !(flow.internal_topics || []).length;
}

function showAlerts(alerts) {
  const list = document.getElementById("alerts");
  if (alerts.length === 0) {
    const none = document.createElement("li");
    none.className = "none";
    none.textContent = "none: every sampled series keeps up";
    list.replaceChildren(none);
    return;
  }
  list.replaceChildren(...alerts.map((alert) => {
    const item = document.createElement("li");
    item.className = "alert";
    item.textContent = `${alert.description}: the source grew ${alert.a_sub} in a period, ` +
      `the copy ${alert.b_sub} in three (threshold ${alert.threshold})`;
    return item;
  }));
}

function showEvents(events) {
  const list = document.getElementById("events");
  list.replaceChildren(...events.slice(0, 50).map((event) => {
    const item = document.createElement("li");
    item.textContent = new Date(event.t * 1000).toLocaleTimeString() + "  " + event.message;
    return item;
  }));
}

async function change(method, path, body, done) {
  try {
    await call(method, path, body);
    say(done);
    await refresh();
    return true;
  } catch (error) {
    if (error instanceof Unauthorized) return askToken();
    say(error.message, true);
    return false;
  }
}

async function refresh() {
  clearTimeout(timer);
  try {
    const flows = await call("GET", "/flows");
    const histories = await Promise.all(flows.map((flow) => call("GET", flowPath(flow) + "/history")));
    flows.forEach((flow, i) => showFlow(flow, histories[i]));
    showAlerts(await call("GET", "/alerts"));
    showEvents(await call("GET", "/events"));
    document.getElementById("updated").textContent = "updated " + new Date().toLocaleTimeString();
    document.getElementById("login").hidden = true;
    document.getElementById("forget").hidden = !token();
    timer = setTimeout(refresh, REFRESH_MS);
  } catch (error) {
    if (error instanceof Unauthorized) return askToken();
    say("ferry's API did not answer: " + error.message, true);
    timer = setTimeout(refresh, REFRESH_MS);
  }
}

function askToken() {
  clearTimeout(timer);
  document.getElementById("login").hidden = false;
  document.getElementById("token").focus();
  if (token()) say("that token was refused", true);
  return false;
}

document.getElementById("login").addEventListener("submit", (event) => {
  event.preventDefault();
  sessionStorage.setItem(TOKEN_KEY, document.getElementById("token").value.trim());
  say("");
  refresh();
});
document.getElementById("forget").addEventListener("click", () => {
  sessionStorage.removeItem(TOKEN_KEY);
  location.reload();
});
refresh();

// trio-broker web console: the live parts (charts polled from /api/...), and confirmations.
// No framework and no build step: pages are rendered on the server; this only draws.
"use strict";

const HISTORY = 60;
const COLORS = ["#2f6fdf", "#e0822b"];

function drawLines(canvas, seriesList) {
  const ratio = window.devicePixelRatio || 1;
  const width = canvas.clientWidth || canvas.width;
  const height = canvas.clientHeight || canvas.height;
  canvas.width = Math.round(width * ratio);
  canvas.height = Math.round(height * ratio);
  const ctx = canvas.getContext("2d");
  ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
  ctx.clearRect(0, 0, width, height);
  let top = 0;
  for (const series of seriesList) for (const v of series) if (v !== null && v > top) top = v;
  top = top > 0 ? top * 1.15 : 1;
  ctx.strokeStyle = "#e3e6eb";
  ctx.fillStyle = "#6b7280";
  ctx.font = "10px sans-serif";
  for (const f of [0, 0.5, 1]) {
    const y = height - 14 - f * (height - 24);
    ctx.beginPath(); ctx.moveTo(0, y); ctx.lineTo(width, y); ctx.stroke();
    ctx.fillText(formatNumber(top * f), 2, y - 2);
  }
  seriesList.forEach((series, index) => {
    ctx.strokeStyle = COLORS[index % COLORS.length];
    ctx.lineWidth = 1.5;
    ctx.beginPath();
    let drawing = false;
    series.forEach((v, i) => {
      const x = width - (series.length - 1 - i) * (width / (HISTORY - 1));
      if (v === null) { drawing = false; return; }
      const y = height - 14 - (v / top) * (height - 24);
      if (drawing) ctx.lineTo(x, y); else ctx.moveTo(x, y);
      drawing = true;
    });
    ctx.stroke();
  });
}

function formatNumber(v) {
  if (v === null || v === undefined) return "-";
  const units = [[1e9, "G"], [1e6, "M"], [1e3, "k"]];
  for (const [size, unit] of units) if (Math.abs(v) >= size) return (v / size).toFixed(1) + unit;
  return v >= 10 || v === 0 ? v.toFixed(0) : v.toFixed(2);
}

function setText(id, text) {
  const el = document.getElementById(id);
  if (el) el.textContent = text;
}

async function pollLive(section) {
  let answer;
  try {
    const response = await fetch(section.dataset.source, {cache: "no-store"});
    if (!response.ok) return;
    answer = await response.json();
  } catch (e) { return; }
  const points = answer.points;
  section.dataset.points = String(points.length);
  for (const canvas of section.querySelectorAll("canvas[data-series]")) {
    const names = canvas.dataset.series.split(" ");
    drawLines(canvas, names.map((name) => points.map((p) => p[name])));
  }
  const last = points.length ? points[points.length - 1] : null;
  if (last) {
    setText("produce-rate", formatNumber(last.produce_rate));
    setText("fetch-rate", formatNumber(last.fetch_rate));
    setText("bytes-in-rate", formatNumber(last.bytes_in_rate));
    setText("bytes-out-rate", formatNumber(last.bytes_out_rate));
    setText("produce-p50", formatNumber(last.produce_p50));
    setText("produce-p99", formatNumber(last.produce_p99));
  }
  setText("connections", String(answer.connections));
}

async function pollLag(canvas, history) {
  try {
    const response = await fetch(canvas.dataset.lagSource, {cache: "no-store"});
    if (!response.ok) return;
    const answer = await response.json();
    history.push(answer.lag);
    if (history.length > HISTORY) history.shift();
    setText("live-lag", answer.lag.toLocaleString());
    canvas.dataset.points = String(history.length);
    drawLines(canvas, [history]);
  } catch (e) { /* the next poll tries again */ }
}

function every(ms, fn) {
  fn();
  setInterval(() => { if (!document.hidden) fn(); }, ms);
}

document.addEventListener("DOMContentLoaded", () => {
  const live = document.getElementById("live");
  if (live) every(1000, () => pollLive(live));
  const lag = document.getElementById("chart-lag");
  if (lag) { const history = []; every(2000, () => pollLag(lag, history)); }
  for (const form of document.querySelectorAll("form[data-confirm]")) {
    form.addEventListener("submit", (event) => {
      if (!window.confirm(form.dataset.confirm)) event.preventDefault();
    });
  }
  const format = document.getElementById("format");
  if (format) format.addEventListener("change", () => format.form.submit());
});

// The canvases: the overall speed over five minutes, and each active download's segment map. Colours come from
// the style sheet's custom properties, so the light and dark schemes draw alike.

import { fmtSpeed, num } from './format.js';
import { HISTORY_MS } from './connection.js';
import { doneRanges, graphTop, racingIds, sampleRuns } from './view.js';

function cssColor(name) {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim() || '#888';
}

function fitCanvas(canvas, cssHeight) {
  const dpr = window.devicePixelRatio || 1;
  const width = Math.max(1, Math.round(canvas.clientWidth || canvas.parentNode.clientWidth || 300));
  if (canvas.style.height !== `${cssHeight}px`) canvas.style.height = `${cssHeight}px`;
  const w = Math.round(width * dpr);
  const h = Math.round(cssHeight * dpr);
  if (canvas.width !== w) canvas.width = w;
  if (canvas.height !== h) canvas.height = h;
  const ctx = canvas.getContext('2d');
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, width, cssHeight);
  return { ctx, width };
}

// The file as a bar: bytes on disk filled in; under it one lane per connection, its remaining range,
// a tick through the bar where it writes now; overlapping (racing) ranges in their own colour.
export function drawSegmentMap(canvas, s, total) {
  const conns = Array.isArray(s.connectionRanges) ? s.connectionRanges.slice(0, 24) : [];
  const barH = 14;
  const laneH = 6;
  const height = barH + (conns.length ? 4 + conns.length * laneH : 0);
  const { ctx, width } = fitCanvas(canvas, height);
  const x = (byte) => Math.max(0, Math.min(width, (num(byte) / total) * width));
  ctx.fillStyle = cssColor('--track');
  ctx.fillRect(0, 0, width, barH);
  ctx.fillStyle = cssColor('--done');
  for (const r of doneRanges(s, total)) {
    if (!Array.isArray(r) || r.length < 2) continue;
    const a = x(r[0]);
    const b = x(r[1]);
    ctx.fillRect(a, 0, Math.max(1, b - a), barH);
  }
  const racing = racingIds(conns);
  const connColor = cssColor('--conn');
  const raceColor = cssColor('--race');
  conns.forEach((c, i) => {
    const color = racing.has(c.id) ? raceColor : connColor;
    const a = x(c.start);
    const b = x(c.end);
    const y = barH + 4 + i * laneH;
    ctx.globalAlpha = 0.6;
    ctx.fillStyle = color;
    ctx.fillRect(a, y, Math.max(2, b - a), laneH - 2);
    ctx.globalAlpha = 1;
    ctx.fillRect(Math.min(a, width - 2), 0, 2, barH);
    ctx.fillRect(Math.min(a, width - 3), y - 1, 3, laneH);
  });
}

/** The speed graph (`#speed-graph`) from the samples, with the limit as a dashed line when it is in view. */
export function drawGraph(data) {
  const canvas = document.getElementById('speed-graph');
  if (document.getElementById('app').hidden || !canvas.clientWidth) return;
  const height = 120;
  const { ctx, width } = fitCanvas(canvas, height);
  const now = Date.now();
  const t0 = now - HISTORY_MS;
  const limit = num(data.limit);
  const top = graphTop(data.samples, t0, limit);
  const padTop = 14;
  const plotH = height - padTop - 16;
  const y = (v) => padTop + plotH - (v / top) * plotH;
  const x = (t) => ((t - t0) / HISTORY_MS) * width;

  ctx.font = '11px system-ui, sans-serif';
  ctx.textBaseline = 'bottom';
  ctx.strokeStyle = cssColor('--line');
  ctx.fillStyle = cssColor('--muted');
  ctx.lineWidth = 1;
  for (const f of [0, 0.5, 1]) {
    const yy = Math.round(y(top * f)) + 0.5;
    ctx.beginPath();
    ctx.moveTo(0, yy);
    ctx.lineTo(width, yy);
    ctx.stroke();
    if (f > 0) ctx.fillText(fmtSpeed(top * f), 2, yy - 2);
  }
  ctx.textBaseline = 'top';
  ctx.fillText('5 min ago', 2, height - 13);
  const nowLabel = 'now';
  ctx.fillText(nowLabel, width - ctx.measureText(nowLabel).width - 2, height - 13);

  if (limit > 0 && limit <= top) {
    ctx.save();
    ctx.setLineDash([5, 4]);
    ctx.strokeStyle = cssColor('--warn');
    const yy = Math.round(y(limit)) + 0.5;
    ctx.beginPath();
    ctx.moveTo(0, yy);
    ctx.lineTo(width, yy);
    ctx.stroke();
    ctx.restore();
    ctx.fillStyle = cssColor('--warn');
    ctx.textBaseline = 'bottom';
    const label = `limit ${fmtSpeed(limit)}`;
    ctx.fillText(label, width - ctx.measureText(label).width - 2, yy - 2);
  }

  const accent = cssColor('--accent');
  const fill = cssColor('--graph-fill');
  for (const r of sampleRuns(data.samples, t0)) {
    ctx.beginPath();
    ctx.moveTo(x(r[0].t), y(0));
    for (const p of r) ctx.lineTo(x(p.t), y(p.v));
    ctx.lineTo(x(r[r.length - 1].t), y(0));
    ctx.closePath();
    ctx.fillStyle = fill;
    ctx.fill();
    ctx.beginPath();
    r.forEach((p, i) => (i ? ctx.lineTo(x(p.t), y(p.v)) : ctx.moveTo(x(p.t), y(p.v))));
    ctx.strokeStyle = accent;
    ctx.lineWidth = 1.5;
    ctx.stroke();
  }
}

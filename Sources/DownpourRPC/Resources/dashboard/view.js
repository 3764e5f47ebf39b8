// What the page shows, worked out as data: the three lists, each row's texts and buttons, the totals, the graph's
// scale. Pure: render.js and graph.js put it into the DOM and onto canvases.

import { downloadName, fmtBytes, fmtEta, fmtSpeed, hostOf, num } from './format.js';

export const STATUS_LABEL = {
  active: 'Downloading', waiting: 'Queued', paused: 'Paused', complete: 'Complete', error: 'Failed',
  removed: 'Removed',
};

/**
 * The three lists as shown: entries without a GID dropped, and a download in two lists at once (a moment between
 * two answers) shown once: stopped wins, then active.
 */
export function visibleLists(data) {
  const seen = new Set();
  const keep = (list) => list.filter((s) => s && s.gid && !seen.has(s.gid) && seen.add(s.gid));
  const stopped = keep(data.stopped);
  const active = keep(data.active);
  const waiting = keep(data.waiting);
  return { active, waiting, stopped, gids: seen };
}

// A stopped status is final (a GID never runs again), so it wins over an active or waiting entry from an older
// frame: an action on a download that has just failed must not act on it as if it still ran.
export function statusOf(data, gid) {
  for (const list of [data.stopped, data.active, data.waiting]) {
    const s = list.find((x) => x && x.gid === gid);
    if (s) return s;
  }
  return null;
}

/** The buttons of a row, by its status. */
export function actionsFor(status) {
  if (status === 'active') return ['Pause', 'Remove'];
  if (status === 'waiting') return ['Pause', 'Move up', 'Move down', 'Remove'];
  if (status === 'paused') return ['Resume', 'Move up', 'Move down', 'Remove'];
  if (status === 'error') return ['Retry', 'Remove'];
  return ['Remove'];
}

/**
 * One row's texts: `status` (the list's when the status says none), `label`, `percent` (null: unknown), `stats`
 * (`5.00 MiB / 24.0 MiB · 20% · 1.00 MiB/s · ETA 19 s · 4 connections`), `failure` (the daemon's error message
 * for a failed download, else ''), `showMap` (an active download of known size gets its segment map), `name`.
 */
export function rowView(s, kind) {
  const status = String(s.status || (kind === 'active' ? 'active' : 'waiting'));
  const total = num(s.totalLength);
  const done = num(s.completedLength);
  const speed = num(s.downloadSpeed);

  let percent = null;
  if (status === 'complete') percent = 100;
  else if (total > 0) percent = Math.min(100, Math.floor((done * 100) / total));

  const parts = [];
  const stoppedEarly = (status === 'error' || status === 'removed') && total === 0 && done === 0;
  if (!stoppedEarly) {
    parts.push(total > 0 ? `${fmtBytes(done)} / ${fmtBytes(total)}` : `${fmtBytes(done)} / size unknown`);
  }
  if (percent !== null && status !== 'complete') parts.push(`${percent}%`);
  if (status === 'active') {
    parts.push(fmtSpeed(speed));
    if (total > 0 && speed > 0) parts.push(`ETA ${fmtEta((total - done) / speed)}`);
    const c = num(s.connections);
    parts.push(`${c} connection${c === 1 ? '' : 's'}`);
    if (typeof s.node === 'string' && s.node) parts.push(`on ${s.node}`); // a fleet: the node that runs it
  }

  let failure = '';
  if (status === 'error') {
    const message = String(s.errorMessage || '').trim();
    failure = message || `Failed with error code ${s.errorCode ?? '?'}`;
  }

  return {
    status,
    label: STATUS_LABEL[status] || status,
    name: downloadName(s),
    total,
    percent,
    stats: parts.join(' · '),
    failure,
    showMap: status === 'active' && total > 0,
  };
}

/**
 * A fleet's nodes as listed (none for a single daemon): `name`, `up`, and `text`
 * (`127.0.0.1:6800 · 1.00 MiB/s · 2 active`, or `not heard from for 42 s` for one that stopped without a word).
 */
export function nodesView(nodes) {
  if (!Array.isArray(nodes)) return [];
  return nodes.filter((n) => n && typeof n.name === 'string').map((n) => {
    const up = n.up !== 'false' && n.up !== false;
    const parts = [];
    if (n.address) parts.push(String(n.address));
    if (up) {
      parts.push(fmtSpeed(num(n.downloadSpeed)), `${num(n.numActive)} active`);
    } else {
      parts.push(`not heard from for ${fmtEta(num(n.secondsSinceSeen))}`);
    }
    return { name: n.name, up, text: parts.join(' · ') };
  });
}

/** Ids of the connections whose remaining ranges overlap another's (a duplicate request racing a slow one). */
export function racingIds(conns) {
  const ids = new Set();
  for (let i = 0; i < conns.length; i++) {
    for (let j = i + 1; j < conns.length; j++) {
      const a = conns[i];
      const b = conns[j];
      if (Math.max(num(a.start), num(b.start)) < Math.min(num(a.end), num(b.end))) {
        ids.add(a.id);
        ids.add(b.id);
      }
    }
  }
  return ids;
}

/**
 * The line under an active download's map: each connection's speed, source host, racing and restarts;
 * `opened` is how many connections the row has seen so far. '' without `connectionRanges` (a plain aria2).
 */
export function connectionsText(connectionRanges, opened) {
  const conns = Array.isArray(connectionRanges) ? connectionRanges : null;
  if (!conns) return '';
  const racing = racingIds(conns);
  const list = conns.map((c) => {
    const restarts = Number(c.restarts) > 0 ? ` (restarted ×${Number(c.restarts)})` : '';
    const from = typeof c.source === 'string' ? ` from ${hostOf(c.source)}` : '';
    return `#${c.id} ${fmtSpeed(num(c.downloadSpeed))}${from}${racing.has(c.id) ? ' (racing)' : ''}${restarts}`;
  });
  let text = conns.length ? list.join(' · ') : 'no connection open';
  if (opened > conns.length) text += ` · ${opened} connections opened so far`;
  return text;
}

// The ranges on disk: the push sends them; aria2's bitfield gives them in pieces.
export function doneRanges(s, total) {
  if (Array.isArray(s.ranges)) return s.ranges;
  const bits = typeof s.bitfield === 'string' ? s.bitfield : '';
  const pieceLength = num(s.pieceLength);
  const pieces = num(s.numPieces);
  if (!bits || !pieceLength || !pieces) return [];
  const ranges = [];
  let start = -1;
  for (let i = 0; i <= pieces; i++) {
    const have = i < pieces && (parseInt(bits[i >> 2] || '0', 16) >> (3 - (i & 3))) & 1;
    if (have && start < 0) start = i;
    if (!have && start >= 0) {
      ranges.push([start * pieceLength, Math.min(i * pieceLength, total)]);
      start = -1;
    }
  }
  return ranges;
}

/** The totals above the lists, the speed limit's texts and the window's title. */
export function summary(data, lists) {
  const speed = num(data.stat.downloadSpeed);
  const limit = data.limit === null ? null : num(data.limit);
  return {
    speedNow: fmtSpeed(speed),
    counts: `· ${lists.active.length} active, ${lists.waiting.length} queued`,
    limitNow: limit === null ? '' : limit > 0 ? `now ${fmtSpeed(limit)}` : 'now none',
    limitPlaceholder: limit ? fmtSpeed(limit).replace('/s', '') : 'none',
    title: lists.active.length ? `${fmtSpeed(speed)} · Downpour` : 'Downpour',
  };
}

// A round top for the graph: 1, 2 or 5 × 10^k of a binary unit (KiB, MiB, GiB).
export function niceCeiling(v) {
  let unit = 1024;
  while (v / unit >= 1000 && unit < 1024 ** 4) unit *= 1024;
  const x = v / unit;
  let p = 1;
  while (p * 10 < x) p *= 10;
  for (const u of [1, 2, 5, 10]) if (u * p >= x) return u * p * unit;
  return 10 * p * unit;
}

/** The graph's top: the highest speed since `t0` plus a tenth, the limit when it is near, 1 KiB/s at least. */
export function graphTop(samples, t0, limit) {
  let max = 0;
  for (const p of samples) if (p.t >= t0) max = Math.max(max, p.v);
  return niceCeiling(Math.max(max * 1.1, limit > 0 && limit < max * 3 ? limit * 1.1 : 0, 1024));
}

/** The samples from `t0` (less a second) in runs, broken where two are more than 5 s apart (the page was away). */
export function sampleRuns(samples, t0) {
  const pts = samples.filter((p) => p.t >= t0 - 1000);
  if (!pts.length) return [];
  const runs = [];
  let run = [];
  for (const p of pts) {
    if (run.length && p.t - run[run.length - 1].t > 5000) { runs.push(run); run = []; }
    run.push(p);
  }
  runs.push(run);
  return runs;
}

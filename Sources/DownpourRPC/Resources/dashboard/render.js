// The DOM: the connection line, the sign-in form or the downloads, and one <li> per download, kept across updates
// (so a button keeps its focus). Text from servers (file names, URLs, error messages) only ever goes through
// textContent.

import { num } from './format.js';
import { drawGraph, drawSegmentMap } from './graph.js';
import { actionsFor, connectionsText, nodesView, rowView, summary, visibleLists } from './view.js';

const $ = (id) => document.getElementById(id);

const rows = new Map(); // gid → row
let rowSerial = 0;

/** The row of a download on the page, if it has one. */
export const rowFor = (gid) => rows.get(gid);

export function setConnection(text, kind) {
  const el = $('connection');
  if (el.textContent !== text) el.textContent = text; // a live region: say it only when it changes
  const className = `connection ${kind || ''}`;
  if (el.className !== className) el.className = className;
}

export function showSignIn(message) {
  $('app').hidden = true;
  $('sign-out').hidden = true;
  $('signin').hidden = false;
  $('signin-error').textContent = message || '';
  const input = $('secret');
  input.value = '';
  input.focus();
}

export function showApp(signOut) {
  $('signin').hidden = true;
  $('signin-error').textContent = '';
  $('app').hidden = false;
  $('sign-out').hidden = !signOut;
}

export function clearRows() {
  for (const row of rows.values()) row.li.remove();
  rows.clear();
}

export function render(data) {
  const lists = visibleLists(data);
  renderList($('active-list'), lists.active, 'active');
  renderList($('waiting-list'), lists.waiting, 'waiting');
  renderList($('stopped-list'), lists.stopped, 'stopped');
  for (const [gid, row] of rows) {
    if (!lists.gids.has(gid)) { row.li.remove(); rows.delete(gid); }
  }
  $('active-count').textContent = String(lists.active.length);
  $('waiting-count').textContent = String(lists.waiting.length);
  $('stopped-count').textContent = String(lists.stopped.length);
  $('purge').disabled = lists.stopped.length === 0;

  renderNodes(nodesView(data.nodes));

  const sum = summary(data, lists);
  $('speed-now').textContent = sum.speedNow;
  $('counts').textContent = sum.counts;
  $('limit-now').textContent = sum.limitNow;
  $('limit').placeholder = sum.limitPlaceholder;
  document.title = sum.title;
  drawGraph(data);
}

/** The graph and the segment maps again (the window's size or the colour scheme changed). */
export function redrawAll(data) {
  drawGraph(data);
  for (const row of rows.values()) {
    if (row.canvas.hidden || !row.lastStatus) continue;
    drawSegmentMap(row.canvas, row.lastStatus, num(row.lastStatus.totalLength));
  }
}

/** A fleet's nodes, one line each; the panel is hidden for a single daemon. */
function renderNodes(nodes) {
  $('nodes-panel').hidden = nodes.length === 0;
  setText($('nodes-count'), String(nodes.length));
  const key = JSON.stringify(nodes);
  const ul = $('nodes-list');
  if (ul.dataset.key === key) return;
  ul.dataset.key = key;
  ul.replaceChildren(...nodes.map((n) => {
    const li = document.createElement('li');
    li.className = n.up ? 'node' : 'node down';
    const name = document.createElement('span');
    name.className = 'node-name';
    name.textContent = n.name;
    const text = document.createElement('span');
    text.className = 'muted';
    text.textContent = n.text;
    li.append(name, ' ', text);
    return li;
  }));
}

function renderList(ul, items, kind) {
  let prev = null;
  items.forEach((s, index) => {
    let row = rows.get(s.gid);
    if (!row) { row = createRow(s.gid); rows.set(s.gid, row); }
    updateRow(row, s, kind, index, items.length);
    const want = prev ? prev.nextSibling : ul.firstChild;
    if (row.li.parentNode !== ul || row.li !== want) ul.insertBefore(row.li, want);
    prev = row.li;
  });
}

function createRow(gid) {
  const li = $('row-template').content.firstElementChild.cloneNode(true);
  li.dataset.gid = gid;
  const id = `dl-${++rowSerial}`;
  const name = li.querySelector('.dl-name');
  name.id = `${id}-name`;
  const progress = li.querySelector('progress');
  progress.setAttribute('aria-labelledby', name.id);
  const canvas = li.querySelector('canvas');
  canvas.setAttribute('aria-hidden', 'true');
  return {
    gid, li, name, progress, canvas,
    badge: li.querySelector('.badge'),
    stats: li.querySelector('.dl-stats'),
    conns: li.querySelector('.dl-conns'),
    error: li.querySelector('.dl-error'),
    actions: li.querySelector('.actions'),
    actionsKey: '',
    seenConnections: new Set(),
    actionError: '', // what a button's call failed with, shown for a while
    busy: false, // a button's call is under way: the buttons are disabled
    lastStatus: null,
  };
}

function setText(el, text) { if (el.textContent !== text) el.textContent = text; }

/** One row from the download's status `s`, at `index` of `count` in the list `kind`. */
export function updateRow(row, s, kind, index, count) {
  const v = rowView(s, kind);
  const status = v.status;
  row.li.className = `dl ${status}`;
  row.li.dataset.status = status;
  setText(row.name, v.name);
  setText(row.badge, v.label);
  row.badge.className = `badge ${status}`;

  const percent = v.percent;
  if (percent === null) {
    if (status === 'active') row.progress.removeAttribute('value'); // unknown size: indeterminate
    else row.progress.value = 0;
  } else if (row.progress.value !== percent || !row.progress.hasAttribute('value')) {
    row.progress.value = percent;
  }
  row.progress.setAttribute('aria-valuetext', percent === null ? 'unknown' : `${percent}%`);
  setText(row.stats, v.stats);

  const error = row.actionError || v.failure;
  row.error.hidden = !error;
  setText(row.error, error);

  row.canvas.hidden = !v.showMap;
  let connText = '';
  if (v.showMap) {
    row.lastStatus = s;
    drawSegmentMap(row.canvas, s, v.total);
    if (Array.isArray(s.connectionRanges)) for (const c of s.connectionRanges) row.seenConnections.add(c.id);
    connText = connectionsText(s.connectionRanges, row.seenConnections.size);
  } else {
    row.seenConnections.clear();
  }
  row.conns.hidden = !connText;
  setText(row.conns, connText);

  // Buttons, rebuilt only when the set changes (so focus stays on the one pressed).
  const actions = actionsFor(status);
  const key = `${actions.join('|')}|${index === 0}|${index === count - 1}|${row.busy}`;
  if (key !== row.actionsKey) {
    const focused = row.actions.contains(document.activeElement) ? document.activeElement.dataset.action : null;
    row.actionsKey = key;
    row.actions.replaceChildren();
    for (const action of actions) {
      const b = document.createElement('button');
      b.type = 'button';
      b.textContent = action;
      b.dataset.action = action;
      if (action === 'Remove') b.className = 'danger';
      if (action === 'Move up' && index === 0) b.disabled = true;
      if (action === 'Move down' && index === count - 1) b.disabled = true;
      if (row.busy) b.disabled = true;
      row.actions.append(b);
      if (action === focused && !b.disabled) b.focus();
    }
  }
}

// Downpour dashboard: talks aria2's JSON-RPC to the daemon that served this page (same origin, `jsonrpc`
// next to the page), over a WebSocket when it can (HTTP POST otherwise). With the daemon's push
// (`downpour.subscribe` → `downpour.onProgress` once a second) it never polls; a plain aria2 answers
// "No such method" and the page polls the lists once a second instead.
//
// This module wires the others together: it holds the connection's state (connection.js decides, here the
// effects are performed: calls, timers, storage, the DOM through render.js) and turns the page's forms and
// buttons into calls. The modules: format.js (numbers and names), rpc.js (JSON-RPC and the client),
// connection.js (the connection as `next(state, event)`), view.js (what the page shows, as data), forms.js (the
// forms' input), actions.js (a row's buttons as calls), render.js (the DOM), graph.js (the canvases).

import { runAction } from './actions.js';
import { initialState, next } from './connection.js';
import { parseAddForm, parseLimit, urisOfLine } from './forms.js';
import { LIST_KEYS, RpcClient, errorInfo, isUnauthorized, tokenInHash } from './rpc.js';
import * as page from './render.js';
import { drawGraph } from './graph.js';
import { statusOf } from './view.js';

const STORAGE_KEY = 'downpour.secret';
const $ = (id) => document.getElementById(id);

const store = {
  get() { try { return localStorage.getItem(STORAGE_KEY); } catch (_) { return null; } },
  set(v) { try { localStorage.setItem(STORAGE_KEY, v); } catch (_) { /* private mode: memory only */ } },
  clear() { try { localStorage.removeItem(STORAGE_KEY); } catch (_) { /* ignore */ } },
};

// ------------------------------------------------------------------------------------------------ the driver
let state = initialState();
let rpc = null; // the client of the current generation (null while signed out)
let tickTimer = null;
let reconnectTimer = null;

let performing = false;
const queued = [];

// One event at a time: an event that an effect raises at once waits until the effects before it are performed.
function dispatch(event) {
  queued.push(event);
  if (performing) return;
  performing = true;
  try {
    while (queued.length) {
      const result = next(state, { ...queued.shift(), now: Date.now() });
      state = result.state;
      for (const effect of result.effects) perform(effect);
    }
  } finally {
    performing = false;
  }
}

function perform(effect) {
  const gen = effect.generation;
  switch (effect.type) {
    case 'setConnection':
      page.setConnection(effect.text, effect.kind);
      break;
    case 'showApp':
      page.showApp(effect.signOut);
      break;
    case 'showSignIn':
      page.showSignIn(effect.message);
      break;
    case 'clearRows':
      page.clearRows();
      break;
    case 'render':
      page.render(state.data);
      break;
    case 'drawGraph':
      drawGraph(state.data);
      break;
    case 'openClient': {
      if (rpc) rpc.close();
      rpc = new RpcClient(effect.secret, location.href);
      const client = rpc;
      client.onNotification = (method, params) => dispatch({ type: 'notification', generation: gen, method, params });
      client.onClose = () => dispatch({ type: 'closed', generation: gen });
      client.openSocket(effect.timeoutMs).then((open) => dispatch({ type: 'socketOpened', generation: gen, open }));
      break;
    }
    case 'closeClient':
      if (rpc) rpc.close();
      rpc = null;
      break;
    case 'check':
      ask(rpc.call('aria2.getGlobalStat'), gen, 'checked', 'checkFailed'); // the secret's test, and the daemon's
      break;
    case 'subscribe':
      ask(rpc.call('downpour.subscribe'), gen, 'subscribed', 'subscribeFailed');
      break;
    case 'poll': {
      const client = rpc;
      const calls = Promise.all([
        client.call('aria2.getGlobalStat'),
        client.call('aria2.tellActive', [LIST_KEYS]),
        client.call('aria2.tellWaiting', [0, 1000, LIST_KEYS]),
        client.call('aria2.tellStopped', [-1, 1000, LIST_KEYS]),
        effect.withOption ? client.call('aria2.getGlobalOption') : Promise.resolve(null),
      ]);
      calls.then(
        ([stat, active, waiting, stopped, option]) =>
          dispatch({ type: 'polled', generation: gen, stat, active, waiting, stopped, option }),
        (e) => dispatch({ type: 'pollFailed', generation: gen, error: errorInfo(e) }),
      );
      break;
    }
    case 'fetchLists':
      Promise.all([
        rpc.call('aria2.tellWaiting', [0, 1000, LIST_KEYS]),
        rpc.call('aria2.tellStopped', [-1, 1000, LIST_KEYS]),
      ]).then(
        ([waiting, stopped]) => dispatch({ type: 'listsFetched', generation: gen, waiting, stopped }),
        (e) => dispatch({ type: 'listsFailed', generation: gen, error: errorInfo(e) }),
      );
      break;
    case 'storeSecret':
      store.set(effect.secret);
      break;
    case 'forgetSecret':
      store.clear();
      break;
    case 'warn':
      console.warn(effect.message, effect.error);
      break;
    case 'stopTimers':
      clearInterval(tickTimer);
      clearTimeout(reconnectTimer);
      tickTimer = null;
      reconnectTimer = null;
      break;
    case 'startTicks':
      clearInterval(tickTimer);
      tickTimer = setInterval(() => dispatch({ type: 'tick', generation: gen }), 1000);
      break;
    case 'reconnectAfter':
      clearTimeout(reconnectTimer);
      reconnectTimer = setTimeout(() => dispatch({ type: 'reconnectDue', generation: gen }), effect.ms);
      break;
    default:
      throw new Error(`dashboard: no such effect ${effect.type}`);
  }
}

// A call whose answer becomes an event: `ok` with the result, or `failed` with the error.
function ask(promise, generation, ok, failed) {
  promise.then(
    () => dispatch({ type: ok, generation }),
    (e) => dispatch({ type: failed, generation, error: errorInfo(e) }),
  );
}

// `#token=SECRET` signs in and is dropped from the address bar at once.
function takeTokenFromHash() {
  const found = tokenInHash(location.hash);
  if (found === null) return null;
  history.replaceState(null, '', location.pathname + location.search + found.hash);
  return found.token;
}

// ------------------------------------------------------------------------------------------------- actions
async function onRowClick(event) {
  const button = event.target.closest('button[data-action]');
  if (!button || button.disabled || !rpc) return;
  const li = button.closest('li.dl');
  const row = li && page.rowFor(li.dataset.gid);
  if (!row) return;
  row.busy = true;
  row.actionError = '';
  row.actionsKey = '';
  const s = statusOf(state.data, row.gid);
  if (s) page.updateRow(row, s, '', 0, 2);
  try {
    await runAction(button.dataset.action, s || { gid: row.gid, status: row.li.dataset.status }, state.data.waiting, {
      call: (method, params) => rpc.call(method, params), // the client of the moment, as for every call
      sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
    });
  } catch (e) {
    if (isUnauthorized(e)) { dispatch({ type: 'refused' }); return; }
    row.actionError = `${button.dataset.action} failed: ${e.message}`;
    setTimeout(() => { row.actionError = ''; page.render(state.data); }, 8000);
  } finally {
    row.busy = false;
    row.actionsKey = '';
  }
  page.render(state.data);
  dispatch({ type: 'refreshLists' });
}

async function onAdd(event) {
  event.preventDefault();
  const msg = $('add-msg');
  msg.className = 'msg';
  const fail = (text) => { msg.textContent = text; msg.className = 'msg bad'; };
  const form = parseAddForm({
    uris: $('uris').value,
    dir: $('opt-dir').value,
    out: $('opt-out').value,
    split: $('opt-split').value,
    checksum: $('opt-checksum').value,
  });
  if (form.error) { fail(form.error); return; }
  const { lines, options } = form;
  const button = event.submitter || $('add-form').querySelector('button[type=submit]');
  button.disabled = true;
  msg.textContent = lines.length > 1 ? `Adding ${lines.length} downloads…` : 'Adding…';
  const failed = [];
  let added = 0;
  for (const [i, line] of lines.entries()) {
    try {
      await rpc.call('aria2.addUri', [urisOfLine(line), { ...options }]);
      added++;
    } catch (e) {
      if (isUnauthorized(e)) { button.disabled = false; dispatch({ type: 'refused' }); return; }
      failed.push({ line, error: `Line ${i + 1}: ${e.message}` });
    }
  }
  button.disabled = false;
  if (failed.length) {
    $('uris').value = failed.map((f) => f.line).join('\n');
    fail(`${added ? `Added ${added}; ` : ''}${failed.map((f) => f.error).join(' ')}`);
  } else {
    $('uris').value = '';
    $('opt-out').value = '';
    $('opt-checksum').value = '';
    msg.textContent = added === 1 ? 'Added 1 download.' : `Added ${added} downloads.`;
  }
  dispatch({ type: 'refreshLists' });
}

async function onLimit(event) {
  event.preventDefault();
  const input = $('limit');
  const msg = $('limit-msg');
  const limit = parseLimit(input.value);
  if (limit.error) { msg.textContent = limit.error; return; }
  msg.textContent = '';
  try {
    await rpc.call('aria2.changeGlobalOption', [{ 'max-overall-download-limit': limit.value }]);
    input.value = '';
    dispatch({ type: 'limitSet', limit: String(limit.bytes) });
  } catch (e) {
    if (isUnauthorized(e)) { dispatch({ type: 'refused' }); return; }
    msg.textContent = `The daemon refused the limit: ${e.message}`;
  }
}

async function onPurge() {
  try {
    await rpc.call('aria2.purgeDownloadResult');
  } catch (e) {
    if (isUnauthorized(e)) { dispatch({ type: 'refused' }); return; }
  }
  dispatch({ type: 'refreshLists' });
}

function onSignIn(event) {
  event.preventDefault();
  const value = $('secret').value;
  if (!value) return;
  $('signin-error').textContent = '';
  dispatch({ type: 'signIn', secret: value });
}

function onSignOut() {
  dispatch({ type: 'signOut' });
}

// --------------------------------------------------------------------------------------------------- start
function start() {
  const fromHash = takeTokenFromHash();
  for (const id of ['active-list', 'waiting-list', 'stopped-list']) $(id).addEventListener('click', onRowClick);
  $('add-form').addEventListener('submit', onAdd);
  $('limit-form').addEventListener('submit', onLimit);
  $('signin-form').addEventListener('submit', onSignIn);
  $('sign-out').addEventListener('click', onSignOut);
  $('purge').addEventListener('click', onPurge);
  window.addEventListener('hashchange', () => {
    const token = takeTokenFromHash();
    if (token !== null) dispatch({ type: 'hashToken', secret: token });
  });
  let resizeTimer = null;
  const redraw = () => page.redrawAll(state.data);
  window.addEventListener('resize', () => { clearTimeout(resizeTimer); resizeTimer = setTimeout(redraw, 100); });
  const scheme = window.matchMedia('(prefers-color-scheme: dark)');
  if (scheme.addEventListener) scheme.addEventListener('change', redraw);
  if (fromHash !== null) {
    dispatch({ type: 'start', secret: fromHash, secretStored: false });
  } else {
    const stored = store.get();
    dispatch({ type: 'start', secret: stored, secretStored: stored !== null });
  }
}

start();

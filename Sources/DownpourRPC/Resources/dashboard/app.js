// Downpour dashboard: talks aria2's JSON-RPC to the daemon that served this page (same origin, `jsonrpc`
// next to the page), over a WebSocket when it can (HTTP POST otherwise). With the daemon's push
// (`downpour.subscribe` → `downpour.onProgress` once a second) it never polls; a plain aria2 answers
// "No such method" and the page polls the lists once a second instead.
// Text from servers (file names, URLs, error messages) only ever goes through textContent.
'use strict';

(() => {
  const STORAGE_KEY = 'downpour.secret';
  const HISTORY_MS = 5 * 60 * 1000;
  const PUSH_STALE_MS = 4000;
  const PUSH_RECONNECT_MS = 15000;
  const CALL_TIMEOUT_MS = 20000;
  const LIST_KEYS = [
    'gid', 'status', 'totalLength', 'completedLength', 'downloadSpeed', 'connections', 'dir', 'files',
    'errorCode', 'errorMessage', 'bitfield', 'numPieces', 'pieceLength',
  ];
  const STATUS_LABEL = {
    active: 'Downloading', waiting: 'Queued', paused: 'Paused', complete: 'Complete', error: 'Failed',
    removed: 'Removed',
  };

  const $ = (id) => document.getElementById(id);

  // ------------------------------------------------------------------------------------------ formatting
  const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  function fmtBytes(n) {
    n = Number(n) || 0;
    let i = 0;
    while (n >= 1024 && i < UNITS.length - 1) { n /= 1024; i++; }
    const digits = i === 0 || n >= 100 ? 0 : n >= 10 ? 1 : 2;
    return `${n.toFixed(digits)} ${UNITS[i]}`;
  }
  const fmtSpeed = (n) => `${fmtBytes(n)}/s`;
  function fmtEta(seconds) {
    if (!isFinite(seconds) || seconds < 0) return '';
    seconds = Math.ceil(seconds);
    if (seconds < 60) return `${seconds} s`;
    const h = Math.floor(seconds / 3600);
    const m = Math.floor((seconds % 3600) / 60);
    const s = seconds % 60;
    const pad = (x) => String(x).padStart(2, '0');
    return h > 0 ? `${h}:${pad(m)}:${pad(s)}` : `${m}:${pad(s)}`;
  }
  function parseSize(text) {
    const m = /^\s*([0-9]+)\s*([kmg]?)\s*$/i.exec(String(text ?? ''));
    if (!m) return null;
    const mult = { '': 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 }[m[2].toLowerCase()];
    return Number(m[1]) * mult;
  }
  function lastSegment(path) {
    const parts = String(path).split(/[\\/]/).filter(Boolean);
    return parts.length ? parts[parts.length - 1] : '';
  }
  function downloadName(s) {
    const file = (s.files && s.files[0]) || {};
    const fromPath = lastSegment(file.path || '');
    if (fromPath) return fromPath;
    const uri = file.uris && file.uris[0] && file.uris[0].uri;
    if (uri) {
      try {
        const u = new URL(uri);
        const seg = lastSegment(u.pathname);
        return seg ? decodeURIComponent(seg) : u.host;
      } catch (_) {
        return uri;
      }
    }
    return s.gid || '?';
  }
  const num = (x) => Number(x) || 0;

  // ----------------------------------------------------------------------------------------------- secret
  const store = {
    get() { try { return localStorage.getItem(STORAGE_KEY); } catch (_) { return null; } },
    set(v) { try { localStorage.setItem(STORAGE_KEY, v); } catch (_) { /* private mode: memory only */ } },
    clear() { try { localStorage.removeItem(STORAGE_KEY); } catch (_) { /* ignore */ } },
  };
  let secret = null; // the secret in use (null: try without one)
  let secretStored = false; // whether `secret` came from or went into storage

  // `#token=SECRET` signs in and is dropped from the address bar at once.
  function takeTokenFromHash() {
    if (!location.hash || location.hash.length < 2) return null;
    const params = new URLSearchParams(location.hash.slice(1));
    const token = params.get('token');
    if (token === null) return null;
    params.delete('token');
    const rest = params.toString();
    history.replaceState(null, '', location.pathname + location.search + (rest ? `#${rest}` : ''));
    return token;
  }

  // ---------------------------------------------------------------------------------------------- the RPC
  class RpcError extends Error {
    constructor(code, message) {
      super(message);
      this.code = code;
    }
  }
  const isUnauthorized = (e) => e instanceof RpcError && (e.code === 401 || /^Unauthorized/.test(e.message));
  const isNoSuchMethod = (e) => e instanceof RpcError && /No such method/i.test(e.message);

  class Rpc {
    constructor(token) {
      const here = new URL('jsonrpc', location.href);
      here.hash = '';
      here.search = '';
      this.httpUrl = here.href;
      const ws = new URL(here.href);
      ws.protocol = here.protocol === 'https:' ? 'wss:' : 'ws:';
      this.wsUrl = ws.href;
      this.token = token;
      this.ws = null;
      this.nextId = 1;
      this.pending = new Map();
      this.closed = false;
      this.onNotification = () => {};
      this.onClose = () => {};
    }

    // Resolves true once the socket is open, false if it could not be opened in time.
    openSocket(timeoutMs) {
      return new Promise((resolve) => {
        let ws;
        try {
          ws = new WebSocket(this.wsUrl);
        } catch (_) {
          resolve(false);
          return;
        }
        let settled = false;
        const timer = setTimeout(() => {
          if (!settled) { settled = true; try { ws.close(); } catch (_) { /* ignore */ } resolve(false); }
        }, timeoutMs);
        ws.onopen = () => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          this.ws = ws;
          resolve(true);
        };
        ws.onerror = () => {
          if (!settled) { settled = true; clearTimeout(timer); resolve(false); }
        };
        ws.onclose = () => {
          if (!settled) { settled = true; clearTimeout(timer); resolve(false); return; }
          if (this.ws !== ws) return;
          this.ws = null;
          for (const [, p] of this.pending) p.reject(new Error('the connection to the daemon closed'));
          this.pending.clear();
          if (!this.closed) this.onClose();
        };
        ws.onmessage = (event) => this.receive(event.data);
      });
    }

    receive(text) {
      let msg;
      try { msg = JSON.parse(text); } catch (_) { return; }
      if (!msg || typeof msg !== 'object' || Array.isArray(msg)) return;
      if ('id' in msg && msg.id !== null && this.pending.has(msg.id)) {
        const p = this.pending.get(msg.id);
        this.pending.delete(msg.id);
        if (msg.error) p.reject(new RpcError(msg.error.code, String(msg.error.message ?? 'error')));
        else p.resolve(msg.result);
      } else if (typeof msg.method === 'string' && !('id' in msg && msg.id !== null)) {
        this.onNotification(msg.method, Array.isArray(msg.params) ? msg.params : []);
      }
    }

    call(method, params = []) {
      const all = method.startsWith('system.') || this.token === null ? params : [`token:${this.token}`, ...params];
      const id = this.nextId++;
      const request = { jsonrpc: '2.0', id, method, params: all };
      if (this.ws && this.ws.readyState === WebSocket.OPEN) {
        return new Promise((resolve, reject) => {
          const timer = setTimeout(() => {
            if (this.pending.delete(id)) reject(new Error(`${method} timed out`));
          }, CALL_TIMEOUT_MS);
          this.pending.set(id, {
            resolve: (v) => { clearTimeout(timer); resolve(v); },
            reject: (e) => { clearTimeout(timer); reject(e); },
          });
          this.ws.send(JSON.stringify(request));
        });
      }
      return this.post(request);
    }

    async post(request) {
      const controller = new AbortController();
      const timer = setTimeout(() => controller.abort(), CALL_TIMEOUT_MS);
      let response;
      try {
        response = await fetch(this.httpUrl, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json' },
          body: JSON.stringify(request),
          cache: 'no-store',
          credentials: 'same-origin',
          signal: controller.signal,
        });
      } finally {
        clearTimeout(timer);
      }
      if (response.status === 401) throw new RpcError(401, 'Unauthorized');
      let body;
      try { body = await response.json(); } catch (_) {
        throw new Error(`the daemon answered HTTP ${response.status} without JSON`);
      }
      if (body && body.error) throw new RpcError(body.error.code, String(body.error.message ?? 'error'));
      if (!body || !('result' in body)) throw new Error('the daemon sent an answer without a result');
      return body.result;
    }

    close() {
      this.closed = true;
      if (this.ws) { try { this.ws.close(); } catch (_) { /* ignore */ } }
      this.ws = null;
    }
  }

  // ------------------------------------------------------------------------------------------------ state
  const state = {
    generation: 0,
    mode: 'connecting', // 'push' | 'poll' | 'connecting' | 'signin'
    active: [],
    waiting: [],
    stopped: [],
    queueVersion: null,
    stat: {},
    limit: null, // bytes per second as a string, '0' = none
    samples: [], // {t, v}
    lastPush: 0,
    listsInFlight: false,
    listsAgain: false,
    pollInFlight: false,
    ticks: 0,
  };
  const rows = new Map(); // gid → row
  let rpc = null;
  let tickTimer = null;
  let reconnectTimer = null;

  // --------------------------------------------------------------------------------------- connection flow
  function setConnection(text, kind) {
    const el = $('connection');
    if (el.textContent !== text) el.textContent = text; // a live region: say it only when it changes
    const className = `connection ${kind || ''}`;
    if (el.className !== className) el.className = className;
  }

  function showSignIn(message) {
    state.mode = 'signin';
    stopLoops();
    if (rpc) { rpc.close(); rpc = null; }
    clearData();
    $('app').hidden = true;
    $('sign-out').hidden = true;
    $('signin').hidden = false;
    $('signin-error').textContent = message || '';
    setConnection('Signed out', '');
    const input = $('secret');
    input.value = '';
    input.focus();
  }

  function showApp() {
    $('signin').hidden = true;
    $('signin-error').textContent = '';
    $('app').hidden = false;
    $('sign-out').hidden = secret === null;
  }

  function clearData() {
    state.active = [];
    state.waiting = [];
    state.stopped = [];
    state.stat = {};
    state.limit = null;
    state.samples = [];
    state.queueVersion = null;
    for (const row of rows.values()) row.li.remove();
    rows.clear();
  }

  function stopLoops() {
    state.generation++;
    clearInterval(tickTimer);
    clearTimeout(reconnectTimer);
    tickTimer = null;
    reconnectTimer = null;
  }

  function scheduleReconnect(ms) {
    clearTimeout(reconnectTimer);
    const gen = state.generation;
    reconnectTimer = setTimeout(() => { if (gen === state.generation) connect(); }, ms);
  }

  async function connect() {
    stopLoops();
    const gen = state.generation;
    if (rpc) rpc.close();
    rpc = new Rpc(secret);
    const client = rpc;
    client.onNotification = (method, params) => { if (gen === state.generation) onNotification(method, params); };
    client.onClose = () => {
      if (gen !== state.generation) return;
      stopLoops();
      setConnection('Connection lost, reconnecting…', 'down');
      scheduleReconnect(2000);
    };
    if (state.mode !== 'push' && state.mode !== 'poll') setConnection('Connecting…', '');
    const socket = await client.openSocket(4000);
    if (gen !== state.generation) return;

    try {
      await client.call('aria2.getGlobalStat'); // the secret's test, and the daemon's
    } catch (e) {
      if (gen !== state.generation) return;
      if (isUnauthorized(e)) {
        refused();
        return;
      }
      setConnection(`Cannot reach the daemon (${e.message}); retrying…`, 'down');
      scheduleReconnect(3000);
      return;
    }
    if (gen !== state.generation) return;
    if (secret !== null && !secretStored) { store.set(secret); secretStored = true; }

    let push = false;
    if (socket) {
      try {
        await client.call('downpour.subscribe');
        push = true;
      } catch (e) {
        if (isUnauthorized(e)) { refused(); return; }
        if (!isNoSuchMethod(e)) console.warn('downpour.subscribe failed, polling instead:', e);
      }
    }
    if (gen !== state.generation) return;
    state.mode = push ? 'push' : 'poll';
    state.lastPush = Date.now();
    showApp();
    setConnection(push ? 'Live' : 'Live (polling: this server does not push)', push ? 'live' : 'poll');
    await poll(gen);
    if (gen !== state.generation) return;
    tickTimer = setInterval(() => tick(gen), 1000);
  }

  function refused() {
    const had = secret !== null;
    if (secretStored) store.clear();
    secret = null;
    secretStored = false;
    showSignIn(had ? 'Wrong secret: the daemon refused it. Enter the secret the daemon was started with (--rpc-secret).' : '');
  }

  function tick(gen) {
    if (gen !== state.generation) return;
    state.ticks++;
    if (state.mode === 'poll') {
      poll(gen);
    } else if (state.mode === 'push' && Date.now() - state.lastPush > PUSH_RECONNECT_MS) {
      setConnection('No update for a while, reconnecting…', 'down');
      connect();
      return;
    } else if (state.mode === 'push' && Date.now() - state.lastPush > PUSH_STALE_MS) {
      setConnection('Live (no update for a while…)', 'poll');
      poll(gen);
    }
    drawGraph();
  }

  // One round of the fallback: the global numbers, the active downloads and both lists.
  async function poll(gen) {
    if (state.pollInFlight || !rpc) return;
    state.pollInFlight = true;
    const client = rpc;
    try {
      const wantOption = state.mode === 'poll' && (state.limit === null || state.ticks % 5 === 0);
      const [stat, active, waiting, stopped, option] = await Promise.all([
        client.call('aria2.getGlobalStat'),
        client.call('aria2.tellActive', [LIST_KEYS]),
        client.call('aria2.tellWaiting', [0, 1000, LIST_KEYS]),
        client.call('aria2.tellStopped', [-1, 1000, LIST_KEYS]),
        wantOption ? client.call('aria2.getGlobalOption') : Promise.resolve(null),
      ]);
      if (gen !== state.generation) return;
      state.stat = stat || {};
      if (state.mode !== 'push' || Date.now() - state.lastPush > PUSH_STALE_MS) {
        state.active = Array.isArray(active) ? active : [];
        addSample(num(state.stat.downloadSpeed));
      }
      state.waiting = Array.isArray(waiting) ? waiting : [];
      state.stopped = Array.isArray(stopped) ? stopped : [];
      if (option) state.limit = String(option['max-overall-download-limit'] ?? '0');
      render();
    } catch (e) {
      if (gen !== state.generation) return;
      if (isUnauthorized(e)) refused();
      else setConnection(`Update failed (${e.message})`, 'down');
    } finally {
      state.pollInFlight = false;
    }
  }

  // The waiting and stopped lists, fetched only when the push says they changed (or after an action).
  async function refreshLists() {
    if (!rpc) return;
    if (state.mode === 'poll') { poll(state.generation); return; }
    if (state.listsInFlight) { state.listsAgain = true; return; }
    state.listsInFlight = true;
    const gen = state.generation;
    try {
      do {
        state.listsAgain = false;
        const [waiting, stopped] = await Promise.all([
          rpc.call('aria2.tellWaiting', [0, 1000, LIST_KEYS]),
          rpc.call('aria2.tellStopped', [-1, 1000, LIST_KEYS]),
        ]);
        if (gen !== state.generation) return;
        state.waiting = Array.isArray(waiting) ? waiting : [];
        state.stopped = Array.isArray(stopped) ? stopped : [];
        render();
      } while (state.listsAgain && gen === state.generation);
    } catch (e) {
      if (gen === state.generation && isUnauthorized(e)) refused();
    } finally {
      state.listsInFlight = false;
    }
  }

  function onNotification(method, params) {
    if (method === 'downpour.onProgress') {
      const p = params[0] || {};
      state.lastPush = Date.now();
      if (state.mode === 'push') setConnection('Live', 'live');
      state.stat = p.globalStat || {};
      if (p.maxOverallDownloadLimit !== undefined) state.limit = String(p.maxOverallDownloadLimit);
      state.active = Array.isArray(p.active) ? p.active : [];
      addSample(num(state.stat.downloadSpeed));
      const version = p.queueVersion === undefined ? null : String(p.queueVersion);
      if (version === null || version !== state.queueVersion) {
        state.queueVersion = version;
        refreshLists();
      }
      render();
    } else if (method.startsWith('aria2.on')) {
      // Start/Pause/Stop/Complete/Error: the lists changed. With the push the next queueVersion says so too.
      if (state.mode === 'poll') poll(state.generation);
      else refreshLists();
    }
  }

  function addSample(v) {
    const now = Date.now();
    state.samples.push({ t: now, v });
    while (state.samples.length && state.samples[0].t < now - HISTORY_MS - 2000) state.samples.shift();
  }

  // --------------------------------------------------------------------------------------------- rendering
  function render() {
    const seen = new Set();
    // A download in two lists at once (a moment between two answers): stopped wins, then active.
    const stopped = state.stopped.filter((s) => s && s.gid && !seen.has(s.gid) && seen.add(s.gid));
    const active = state.active.filter((s) => s && s.gid && !seen.has(s.gid) && seen.add(s.gid));
    const waiting = state.waiting.filter((s) => s && s.gid && !seen.has(s.gid) && seen.add(s.gid));
    renderList($('active-list'), active, 'active');
    renderList($('waiting-list'), waiting, 'waiting');
    renderList($('stopped-list'), stopped, 'stopped');
    for (const [gid, row] of rows) {
      if (!seen.has(gid)) { row.li.remove(); rows.delete(gid); }
    }
    $('active-count').textContent = String(active.length);
    $('waiting-count').textContent = String(waiting.length);
    $('stopped-count').textContent = String(stopped.length);
    $('purge').disabled = stopped.length === 0;

    const speed = num(state.stat.downloadSpeed);
    $('speed-now').textContent = fmtSpeed(speed);
    $('counts').textContent = `· ${active.length} active, ${waiting.length} queued`;
    const limit = state.limit === null ? null : num(state.limit);
    $('limit-now').textContent = limit === null ? '' : limit > 0 ? `now ${fmtSpeed(limit)}` : 'now none';
    $('limit').placeholder = limit ? fmtSpeed(limit).replace('/s', '') : 'none';
    document.title = active.length ? `${fmtSpeed(speed)} · Downpour` : 'Downpour';
    drawGraph();
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

  let rowSerial = 0;
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
      actionError: '',
      busy: false,
    };
  }

  function setText(el, text) { if (el.textContent !== text) el.textContent = text; }

  function updateRow(row, s, kind, index, count) {
    const status = String(s.status || (kind === 'active' ? 'active' : 'waiting'));
    const total = num(s.totalLength);
    const done = num(s.completedLength);
    const speed = num(s.downloadSpeed);
    row.li.className = `dl ${status}`;
    row.li.dataset.status = status;
    setText(row.name, downloadName(s));
    setText(row.badge, STATUS_LABEL[status] || status);
    row.badge.className = `badge ${status}`;

    let percent = null;
    if (status === 'complete') percent = 100;
    else if (total > 0) percent = Math.min(100, Math.floor((done * 100) / total));
    if (percent === null) {
      if (status === 'active') row.progress.removeAttribute('value'); // unknown size: indeterminate
      else row.progress.value = 0;
    } else if (row.progress.value !== percent || !row.progress.hasAttribute('value')) {
      row.progress.value = percent;
    }
    row.progress.setAttribute('aria-valuetext', percent === null ? 'unknown' : `${percent}%`);

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
    }
    setText(row.stats, parts.join(' · '));

    let error = row.actionError;
    if (!error && status === 'error') {
      const message = String(s.errorMessage || '').trim();
      error = message || `Failed with error code ${s.errorCode ?? '?'}`;
    }
    row.error.hidden = !error;
    setText(row.error, error);

    const showMap = status === 'active' && total > 0;
    row.canvas.hidden = !showMap;
    if (showMap) {
      drawSegmentMap(row, s, total);
    } else {
      row.seenConnections.clear();
    }
    const connText = showMap ? connectionsText(row, s) : '';
    row.conns.hidden = !connText;
    setText(row.conns, connText);

    // Buttons, rebuilt only when the set changes (so focus stays on the one pressed).
    let actions;
    if (status === 'active') actions = ['Pause', 'Remove'];
    else if (status === 'waiting') actions = ['Pause', 'Move up', 'Move down', 'Remove'];
    else if (status === 'paused') actions = ['Resume', 'Move up', 'Move down', 'Remove'];
    else if (status === 'error') actions = ['Retry', 'Remove'];
    else actions = ['Remove'];
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

  function connectionsText(row, s) {
    const conns = Array.isArray(s.connectionRanges) ? s.connectionRanges : null;
    if (!conns) return '';
    for (const c of conns) row.seenConnections.add(c.id);
    const racing = racingIds(conns);
    const list = conns.map((c) => {
      const restarts = Number(c.restarts) > 0 ? ` (restarted ×${Number(c.restarts)})` : '';
      const from = typeof c.source === 'string' ? ` from ${hostOf(c.source)}` : '';
      return `#${c.id} ${fmtSpeed(num(c.downloadSpeed))}${from}${racing.has(c.id) ? ' (racing)' : ''}${restarts}`;
    });
    const opened = row.seenConnections.size;
    let text = conns.length ? list.join(' · ') : 'no connection open';
    if (opened > conns.length) text += ` · ${opened} connections opened so far`;
    return text;
  }

  function hostOf(url) {
    try {
      return new URL(url).host;
    } catch {
      return url;
    }
  }

  function racingIds(conns) {
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

  // The ranges on disk: the push sends them; aria2's bitfield gives them in pieces.
  function doneRanges(s, total) {
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
  function drawSegmentMap(row, s, total) {
    row.lastStatus = s;
    const conns = Array.isArray(s.connectionRanges) ? s.connectionRanges.slice(0, 24) : [];
    const barH = 14;
    const laneH = 6;
    const height = barH + (conns.length ? 4 + conns.length * laneH : 0);
    const { ctx, width } = fitCanvas(row.canvas, height);
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

  // A round top for the graph: 1, 2 or 5 × 10^k of a binary unit (KiB, MiB, GiB).
  function niceCeiling(v) {
    let unit = 1024;
    while (v / unit >= 1000 && unit < 1024 ** 4) unit *= 1024;
    const x = v / unit;
    let p = 1;
    while (p * 10 < x) p *= 10;
    for (const u of [1, 2, 5, 10]) if (u * p >= x) return u * p * unit;
    return 10 * p * unit;
  }

  function drawGraph() {
    const canvas = $('speed-graph');
    if ($('app').hidden || !canvas.clientWidth) return;
    const height = 120;
    const { ctx, width } = fitCanvas(canvas, height);
    const now = Date.now();
    const t0 = now - HISTORY_MS;
    const limit = num(state.limit);
    let max = 0;
    for (const p of state.samples) if (p.t >= t0) max = Math.max(max, p.v);
    const top = niceCeiling(Math.max(max * 1.1, limit > 0 && limit < max * 3 ? limit * 1.1 : 0, 1024));
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

    // The line, broken where samples are more than 5 s apart (the page was away).
    const pts = state.samples.filter((p) => p.t >= t0 - 1000);
    if (!pts.length) return;
    const runs = [];
    let run = [];
    for (const p of pts) {
      if (run.length && p.t - run[run.length - 1].t > 5000) { runs.push(run); run = []; }
      run.push(p);
    }
    runs.push(run);
    const accent = cssColor('--accent');
    const fill = cssColor('--graph-fill');
    for (const r of runs) {
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

  function redrawAll() {
    drawGraph();
    for (const row of rows.values()) {
      if (!row.canvas.hidden && row.lastStatus) drawSegmentMap(row, row.lastStatus, num(row.lastStatus.totalLength));
    }
  }

  // ---------------------------------------------------------------------------------------------- actions
  // A stopped status is final (a GID never runs again), so it wins over an active or waiting entry from an older
  // frame: an action on a download that has just failed must not act on it as if it still ran.
  function statusOf(gid) {
    for (const list of [state.stopped, state.active, state.waiting]) {
      const s = list.find((x) => x && x.gid === gid);
      if (s) return s;
    }
    return null;
  }

  async function runAction(row, action) {
    const gid = row.gid;
    const s = statusOf(gid) || { gid, status: row.li.dataset.status };
    const status = s.status;
    switch (action) {
      case 'Pause':
        await rpc.call('aria2.forcePause', [gid]);
        break;
      case 'Resume':
        await rpc.call('aria2.unpause', [gid]);
        break;
      case 'Remove':
        if (status === 'complete' || status === 'error' || status === 'removed') {
          await rpc.call('aria2.removeDownloadResult', [gid]);
        } else {
          await rpc.call('aria2.forceRemove', [gid]);
          // aria2 keeps a result ("removed") only for an active one; a queued one is simply gone.
          await dropResultWhenStopped(gid, status === 'active' ? 20 : 2);
        }
        break;
      case 'Retry': {
        const options = (await rpc.call('aria2.getOption', [gid])) || {};
        const file = (s.files && s.files[0]) || {};
        const uris = [...new Set((file.uris || []).map((u) => u.uri).filter(Boolean))];
        if (!uris.length) throw new Error('this download has no URL left to retry');
        await rpc.call('aria2.addUri', [uris, options]);
        await rpc.call('aria2.removeDownloadResult', [gid]).catch(() => {});
        break;
      }
      case 'Move up':
      case 'Move down': {
        const index = state.waiting.findIndex((x) => x.gid === gid);
        if (index < 0) return;
        const to = action === 'Move up' ? Math.max(0, index - 1) : index + 1;
        await rpc.call('aria2.changePosition', [gid, to, 'POS_SET']);
        break;
      }
      default:
        return;
    }
  }

  // A removed active download stops after a moment; its result is then dropped too, so it leaves the page.
  async function dropResultWhenStopped(gid, tries) {
    for (let i = 0; i < tries; i++) {
      try {
        await rpc.call('aria2.removeDownloadResult', [gid]);
        return;
      } catch (e) {
        if (isUnauthorized(e)) throw e;
      }
      await new Promise((r) => setTimeout(r, 250));
    }
  }

  async function onRowClick(event) {
    const button = event.target.closest('button[data-action]');
    if (!button || button.disabled || !rpc) return;
    const li = button.closest('li.dl');
    const row = li && rows.get(li.dataset.gid);
    if (!row) return;
    row.busy = true;
    row.actionError = '';
    row.actionsKey = '';
    const s = statusOf(row.gid);
    if (s) updateRow(row, s, '', 0, 2);
    try {
      await runAction(row, button.dataset.action);
    } catch (e) {
      if (isUnauthorized(e)) { refused(); return; }
      row.actionError = `${button.dataset.action} failed: ${e.message}`;
      setTimeout(() => { row.actionError = ''; render(); }, 8000);
    } finally {
      row.busy = false;
      row.actionsKey = '';
    }
    render();
    refreshLists();
  }

  async function onAdd(event) {
    event.preventDefault();
    const msg = $('add-msg');
    msg.className = 'msg';
    const lines = $('uris').value.split(/\r?\n/).map((l) => l.trim()).filter(Boolean);
    if (!lines.length) { msg.textContent = 'Enter at least one URL.'; msg.className = 'msg bad'; return; }
    const options = {};
    const dir = $('opt-dir').value.trim();
    const out = $('opt-out').value.trim();
    const split = $('opt-split').value.trim();
    let checksum = $('opt-checksum').value.trim();
    const fail = (text) => { msg.textContent = text; msg.className = 'msg bad'; };
    if (dir) options.dir = dir;
    if (out) {
      if (lines.length > 1) { fail('A file name applies to one download; leave it empty for several lines.'); return; }
      if (/[\\/]/.test(out) || out === '.' || out === '..') { fail('The file name cannot contain a slash.'); return; }
      options.out = out;
    }
    if (split) {
      const n = Number(split);
      if (!Number.isInteger(n) || n < 1) { fail('Connections must be a whole number from 1.'); return; }
      options.split = String(n);
      options['max-connection-per-server'] = String(Math.min(n, 16));
    }
    if (checksum) {
      if (/^[0-9a-f]{64}$/i.test(checksum)) checksum = `sha-256=${checksum}`;
      if (!/^[a-z0-9-]+=[0-9a-f]+$/i.test(checksum)) {
        fail('Checksum: TYPE=HEX, for example sha-256=9f86d0…, or a bare SHA-256 in hex.');
        return;
      }
      const [type, hex] = checksum.split('=');
      options.checksum = `${type.toLowerCase()}=${hex.toLowerCase()}`;
      if (lines.length > 1) { fail('A checksum applies to one download; add the lines one at a time.'); return; }
    }
    for (const [i, line] of lines.entries()) {
      for (const uri of line.split(/\s+/)) {
        if (!/^[a-z][a-z0-9+.-]*:\S+$/i.test(uri)) { fail(`Line ${i + 1}: “${uri}” is not a URL.`); return; }
      }
    }
    const button = event.submitter || $('add-form').querySelector('button[type=submit]');
    button.disabled = true;
    msg.textContent = lines.length > 1 ? `Adding ${lines.length} downloads…` : 'Adding…';
    const failed = [];
    let added = 0;
    for (const [i, line] of lines.entries()) {
      try {
        await rpc.call('aria2.addUri', [line.split(/\s+/), { ...options }]);
        added++;
      } catch (e) {
        if (isUnauthorized(e)) { button.disabled = false; refused(); return; }
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
    refreshLists();
  }

  async function onLimit(event) {
    event.preventDefault();
    const input = $('limit');
    const text = input.value.trim() || '0';
    const bytes = parseSize(text);
    const msg = $('limit-msg');
    if (bytes === null) { msg.textContent = 'Use bytes per second, for example 500K or 10M (0 for none).'; return; }
    msg.textContent = '';
    const value = text.replace(/\s+/g, '').toUpperCase();
    try {
      await rpc.call('aria2.changeGlobalOption', [{ 'max-overall-download-limit': value }]);
      state.limit = String(bytes);
      input.value = '';
      render();
      drawGraph();
    } catch (e) {
      if (isUnauthorized(e)) { refused(); return; }
      msg.textContent = `The daemon refused the limit: ${e.message}`;
    }
  }

  async function onPurge() {
    try {
      await rpc.call('aria2.purgeDownloadResult');
    } catch (e) {
      if (isUnauthorized(e)) { refused(); return; }
    }
    refreshLists();
  }

  function onSignIn(event) {
    event.preventDefault();
    const value = $('secret').value;
    if (!value) return;
    secret = value;
    secretStored = false;
    $('signin-error').textContent = '';
    setConnection('Checking the secret…', '');
    state.mode = 'connecting';
    connect();
  }

  function onSignOut() {
    store.clear();
    secret = null;
    secretStored = false;
    showSignIn('');
  }

  // ------------------------------------------------------------------------------------------------ start
  function start() {
    const fromHash = takeTokenFromHash();
    if (fromHash !== null) {
      secret = fromHash;
      secretStored = false;
    } else {
      secret = store.get();
      secretStored = secret !== null;
    }
    for (const id of ['active-list', 'waiting-list', 'stopped-list']) $(id).addEventListener('click', onRowClick);
    $('add-form').addEventListener('submit', onAdd);
    $('limit-form').addEventListener('submit', onLimit);
    $('signin-form').addEventListener('submit', onSignIn);
    $('sign-out').addEventListener('click', onSignOut);
    $('purge').addEventListener('click', onPurge);
    window.addEventListener('hashchange', () => {
      const token = takeTokenFromHash();
      if (token !== null) { secret = token; secretStored = false; state.mode = 'connecting'; connect(); }
    });
    let resizeTimer = null;
    window.addEventListener('resize', () => { clearTimeout(resizeTimer); resizeTimer = setTimeout(redrawAll, 100); });
    const scheme = window.matchMedia('(prefers-color-scheme: dark)');
    if (scheme.addEventListener) scheme.addEventListener('change', redrawAll);
    connect();
  }

  start();
})();

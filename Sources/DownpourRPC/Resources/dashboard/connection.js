// The page's connection to the daemon as a pure state machine: `next(state, event)` returns the new state and the
// effects to perform, in order; app.js performs them and turns what comes back (answers, timers, notifications)
// into events. Nothing here touches the DOM, the network, storage or the clock: an event carries `now` (ms).
//
// The flow: open a client (WebSocket, 4 s at most, else HTTP POST) → `aria2.getGlobalStat` (the secret's test:
// Unauthorized shows the sign-in form; any other failure retries in 3 s) → with a socket, `downpour.subscribe`
// (push; "No such method" from a plain aria2 means polling) → one full poll → a tick every second. With the push
// the lists are fetched only when `queueVersion` changes or an `aria2.on*` notification says so; 4 s without a push
// polls meanwhile, 15 s reconnects. A socket that closes reconnects in 2 s.
//
// Every connect (and every sign-out or refusal) starts a new `generation`; an event of an older one is dropped,
// except that it still ends its own poll or list fetch (so `pollInFlight` and `listsInFlight` never stick).

export const PUSH_STALE_MS = 4000;
export const PUSH_RECONNECT_MS = 15000;
export const SOCKET_TIMEOUT_MS = 4000;
export const CHECK_RETRY_MS = 3000;
export const CLOSED_RETRY_MS = 2000;
export const HISTORY_MS = 5 * 60 * 1000;
export const WRONG_SECRET =
  'Wrong secret: the daemon refused it. Enter the secret the daemon was started with (--rpc-secret).';

/** What the page shows, as the daemon last said it. */
export const emptyData = () => ({
  active: [],
  waiting: [],
  stopped: [],
  stat: {},
  limit: null, // bytes per second as a string, '0' = none; null = not known yet
  samples: [], // {t, v}: the overall speed over time, for the graph
});

export function initialState() {
  return {
    generation: 0,
    mode: 'connecting', // 'connecting' | 'push' | 'poll' | 'signin'
    // Where the current generation's connect is: 'idle' | 'opening' | 'checking' | 'subscribing' | 'firstPoll'
    // (waiting for the one full poll before the ticks) | 'running' (ticking) | 'waiting' (a reconnect is due).
    step: 'idle',
    secret: null, // the secret in use (null: try without one)
    secretStored: false, // whether `secret` came from or went into storage
    client: false, // whether a client exists (app.js holds it)
    socket: false, // whether the current client's WebSocket opened
    lastPush: 0,
    ticks: 0,
    pollInFlight: false,
    listsInFlight: false,
    listsAgain: false,
    queueVersion: null,
    data: emptyData(),
  };
}

/**
 * Events (each with `now`, ms since the epoch):
 * - `start {secret, secretStored}`: the page opened, with the secret from `#token=` (not stored) or storage.
 * - `signIn {secret}`, `signOut`, `hashToken {secret}` (`#token=` typed into the address of the open page).
 * - `socketOpened {generation, open}`: the client tried its WebSocket.
 * - `checked {generation}`, `checkFailed {generation, error}`: `aria2.getGlobalStat`, the secret's test.
 * - `subscribed {generation}`, `subscribeFailed {generation, error}`.
 * - `polled {generation, stat, active, waiting, stopped, option}`, `pollFailed {generation, error}`.
 * - `listsFetched {generation, waiting, stopped}`, `listsFailed {generation, error}`.
 * - `notification {generation, method, params}`, `closed {generation}` (an open socket closed by itself).
 * - `tick {generation}`, `reconnectDue {generation}`: the timers.
 * - `refreshLists` (an action changed the queue), `refused` (an action was answered Unauthorized),
 *   `limitSet {limit}` (the daemon took a new speed limit).
 * An `error` is `{unauthorized, noSuchMethod, message}`.
 *
 * Effects:
 * - `setConnection {text, kind}`; `showApp {signOut}`; `showSignIn {message}`; `clearRows`; `render`; `drawGraph`.
 * - `openClient {generation, secret, timeoutMs}` (closes the old client; the new one tries its socket that long);
 *   `closeClient`.
 * - `check`, `subscribe`, `poll {withOption}`, `fetchLists`: calls, each with the `generation` to answer with.
 * - `storeSecret {secret}`, `forgetSecret`; `warn {message, error}`.
 * - `stopTimers`; `startTicks {generation}` (every second); `reconnectAfter {generation, ms}`.
 */
export function next(state, event) {
  const m = new Machine(state, event.now ?? 0);
  m.handle(event);
  return { state: m.state, effects: m.effects };
}

class Machine {
  constructor(state, now) {
    this.state = { ...state, data: { ...state.data } };
    this.now = now;
    this.effects = [];
  }

  emit(type, fields = {}) { this.effects.push({ type, ...fields }); }

  current(event) { return event.generation === this.state.generation; }

  handle(event) {
    const s = this.state;
    switch (event.type) {
      case 'start':
        s.secret = event.secret ?? null;
        s.secretStored = s.secret !== null && Boolean(event.secretStored);
        this.connect();
        return;
      case 'signIn':
        s.secret = event.secret;
        s.secretStored = false;
        this.emit('setConnection', { text: 'Checking the secret…', kind: '' });
        s.mode = 'connecting';
        this.connect();
        return;
      case 'hashToken':
        s.secret = event.secret;
        s.secretStored = false;
        s.mode = 'connecting';
        this.connect();
        return;
      case 'signOut':
        this.emit('forgetSecret');
        s.secret = null;
        s.secretStored = false;
        this.showSignIn('');
        return;
      case 'socketOpened':
        if (!this.current(event)) return;
        s.socket = Boolean(event.open);
        s.step = 'checking';
        this.emit('check', { generation: s.generation });
        return;
      case 'checked':
        if (!this.current(event)) return;
        if (s.secret !== null && !s.secretStored) {
          this.emit('storeSecret', { secret: s.secret });
          s.secretStored = true;
        }
        if (s.socket) {
          s.step = 'subscribing';
          this.emit('subscribe', { generation: s.generation });
        } else {
          this.live(false);
        }
        return;
      case 'checkFailed':
        if (!this.current(event)) return;
        if (event.error.unauthorized) { this.refused(); return; }
        this.emit('setConnection', {
          text: `Cannot reach the daemon (${event.error.message}); retrying…`,
          kind: 'down',
        });
        s.step = 'waiting';
        this.emit('reconnectAfter', { generation: s.generation, ms: CHECK_RETRY_MS });
        return;
      case 'subscribed':
        if (!this.current(event)) return;
        this.live(true);
        return;
      case 'subscribeFailed':
        if (!this.current(event)) return;
        if (event.error.unauthorized) { this.refused(); return; }
        if (!event.error.noSuchMethod) {
          this.emit('warn', { message: 'downpour.subscribe failed, polling instead:', error: event.error });
        }
        this.live(false);
        return;
      case 'polled':
        s.pollInFlight = false;
        if (!this.current(event)) return;
        this.applyPoll(event);
        this.emit('render');
        this.firstPollDone();
        return;
      case 'pollFailed':
        s.pollInFlight = false;
        if (!this.current(event)) return;
        if (event.error.unauthorized) { this.refused(); return; }
        this.emit('setConnection', { text: `Update failed (${event.error.message})`, kind: 'down' });
        this.firstPollDone();
        return;
      case 'listsFetched':
        if (!this.current(event)) { s.listsInFlight = false; return; }
        s.data.waiting = arrayOr(event.waiting);
        s.data.stopped = arrayOr(event.stopped);
        this.emit('render');
        if (s.listsAgain) {
          s.listsAgain = false;
          this.emit('fetchLists', { generation: s.generation });
        } else {
          s.listsInFlight = false;
        }
        return;
      case 'listsFailed':
        s.listsInFlight = false;
        if (this.current(event) && event.error.unauthorized) this.refused();
        return;
      case 'notification':
        if (!this.current(event)) return;
        this.notification(event.method, event.params || []);
        return;
      case 'closed':
        if (!this.current(event)) return;
        this.stopLoops();
        this.emit('setConnection', { text: 'Connection lost, reconnecting…', kind: 'down' });
        s.step = 'waiting';
        this.emit('reconnectAfter', { generation: s.generation, ms: CLOSED_RETRY_MS });
        return;
      case 'tick':
        if (!this.current(event)) return;
        this.tick();
        return;
      case 'reconnectDue':
        if (!this.current(event)) return;
        this.connect();
        return;
      case 'refreshLists':
        this.refreshLists();
        return;
      case 'refused':
        this.refused();
        return;
      case 'limitSet':
        s.data.limit = event.limit;
        this.emit('render');
        this.emit('drawGraph');
        return;
      default:
        throw new Error(`connection: no such event ${event.type}`);
    }
  }

  // A new generation: the timers of the old one stop and its answers are dropped.
  stopLoops() {
    this.state.generation++;
    this.emit('stopTimers');
  }

  connect() {
    const s = this.state;
    this.stopLoops();
    s.client = true;
    s.socket = false;
    s.step = 'opening';
    if (s.mode !== 'push' && s.mode !== 'poll') this.emit('setConnection', { text: 'Connecting…', kind: '' });
    this.emit('openClient', { generation: s.generation, secret: s.secret, timeoutMs: SOCKET_TIMEOUT_MS });
  }

  // The secret works (or none is needed): show the downloads, then one full poll, then the ticks.
  live(push) {
    const s = this.state;
    s.mode = push ? 'push' : 'poll';
    s.lastPush = this.now;
    this.emit('showApp', { signOut: s.secret !== null });
    this.emit(
      'setConnection',
      push ? { text: 'Live', kind: 'live' } : { text: 'Live (polling: this server does not push)', kind: 'poll' },
    );
    s.step = 'firstPoll';
    if (!this.poll()) this.firstPollDone(); // a poll of an older generation still runs: tick without waiting
  }

  firstPollDone() {
    const s = this.state;
    if (s.step !== 'firstPoll') return;
    s.step = 'running';
    this.emit('startTicks', { generation: s.generation });
  }

  refused() {
    const s = this.state;
    const had = s.secret !== null;
    if (s.secretStored) this.emit('forgetSecret');
    s.secret = null;
    s.secretStored = false;
    this.showSignIn(had ? WRONG_SECRET : '');
  }

  showSignIn(message) {
    const s = this.state;
    s.mode = 'signin';
    this.stopLoops();
    s.step = 'idle';
    if (s.client) this.emit('closeClient');
    s.client = false;
    s.socket = false;
    s.data = emptyData();
    s.queueVersion = null;
    this.emit('clearRows');
    this.emit('showSignIn', { message });
    this.emit('setConnection', { text: 'Signed out', kind: '' });
  }

  tick() {
    const s = this.state;
    s.ticks++;
    if (s.mode === 'poll') {
      this.poll();
    } else if (s.mode === 'push' && this.now - s.lastPush > PUSH_RECONNECT_MS) {
      this.emit('setConnection', { text: 'No update for a while, reconnecting…', kind: 'down' });
      this.connect();
      return;
    } else if (s.mode === 'push' && this.now - s.lastPush > PUSH_STALE_MS) {
      this.emit('setConnection', { text: 'Live (no update for a while…)', kind: 'poll' });
      this.poll();
    }
    this.emit('drawGraph');
  }

  // One round of the fallback: the global numbers, the active downloads and both lists (and, polling, the limit
  // at first and every fifth tick). False when one is still under way.
  poll() {
    const s = this.state;
    if (s.pollInFlight || !s.client) return false;
    s.pollInFlight = true;
    const withOption = s.mode === 'poll' && (s.data.limit === null || s.ticks % 5 === 0);
    this.emit('poll', { generation: s.generation, withOption });
    return true;
  }

  applyPoll(event) {
    const s = this.state;
    const d = s.data;
    d.stat = event.stat || {};
    // With a live push the active list (with its ranges) comes from the push.
    if (s.mode !== 'push' || this.now - s.lastPush > PUSH_STALE_MS) {
      d.active = arrayOr(event.active);
      d.samples = addSample(d.samples, Number(d.stat.downloadSpeed) || 0, this.now);
    }
    d.waiting = arrayOr(event.waiting);
    d.stopped = arrayOr(event.stopped);
    if (event.option) d.limit = String(event.option['max-overall-download-limit'] ?? '0');
  }

  // The waiting and stopped lists, fetched only when the push says they changed (or after an action); polling,
  // a whole poll. One fetch at a time; asked again meanwhile, it runs once more when the first one is answered.
  refreshLists() {
    const s = this.state;
    if (!s.client) return;
    if (s.mode === 'poll') { this.poll(); return; }
    if (s.listsInFlight) { s.listsAgain = true; return; }
    s.listsInFlight = true;
    s.listsAgain = false;
    this.emit('fetchLists', { generation: s.generation });
  }

  notification(method, params) {
    const s = this.state;
    const d = s.data;
    if (method === 'downpour.onProgress') {
      const p = params[0] || {};
      s.lastPush = this.now;
      if (s.mode === 'push') this.emit('setConnection', { text: 'Live', kind: 'live' });
      d.stat = p.globalStat || {};
      if (p.maxOverallDownloadLimit !== undefined) d.limit = String(p.maxOverallDownloadLimit);
      d.active = arrayOr(p.active);
      // A fleet's push lists its nodes; a single daemon's has none.
      if (Array.isArray(p.nodes)) d.nodes = p.nodes;
      else delete d.nodes;
      d.samples = addSample(d.samples, Number(d.stat.downloadSpeed) || 0, this.now);
      const version = p.queueVersion === undefined ? null : String(p.queueVersion);
      if (version === null || version !== s.queueVersion) {
        s.queueVersion = version;
        this.refreshLists();
      }
      this.emit('render');
    } else if (method.startsWith('aria2.on')) {
      // Start/Pause/Stop/Complete/Error: the lists changed. With the push the next queueVersion says so too.
      if (s.mode === 'poll') this.poll();
      else this.refreshLists();
    }
  }
}

const arrayOr = (x) => (Array.isArray(x) ? x : []);

/** The speed samples with `v` at `now`, less those older than the graph's five minutes (and 2 s). */
export function addSample(samples, v, now) {
  const kept = samples.filter((p) => p.t >= now - HISTORY_MS - 2000);
  kept.push({ t: now, v });
  return kept;
}

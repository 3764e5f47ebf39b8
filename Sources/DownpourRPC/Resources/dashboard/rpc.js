// aria2's JSON-RPC as the page speaks it: requests with the secret first, answers and notifications told apart,
// and a client that sends over the WebSocket once it is open and by HTTP POST otherwise.
// The functions are pure; `RpcClient` touches WebSocket, fetch and timers only when it is used, never on import.

/** The fields the page asks for in `tellActive`, `tellWaiting` and `tellStopped`. */
export const LIST_KEYS = [
  'gid', 'status', 'totalLength', 'completedLength', 'downloadSpeed', 'connections', 'dir', 'files',
  'errorCode', 'errorMessage', 'bitfield', 'numPieces', 'pieceLength',
];

const CALL_TIMEOUT_MS = 20000;

/** An error the daemon answered (`code`, `message`), as opposed to a transport failure (a plain Error). */
export class RpcError extends Error {
  constructor(code, message) {
    super(message);
    this.code = code;
  }
}

/** The daemon refused the secret (aria2: code 1, "Unauthorized"; HTTP 401 from a proxy in front). */
export const isUnauthorized = (e) => e instanceof RpcError && (e.code === 401 || /^Unauthorized/.test(e.message));
/** A plain aria2 does not know the method (`downpour.subscribe`). */
export const isNoSuchMethod = (e) => e instanceof RpcError && /No such method/i.test(e.message);

/** An error as the connection's events carry it: what `connection.js` decides on, and the text it shows. */
export function errorInfo(e) {
  return {
    unauthorized: isUnauthorized(e),
    noSuchMethod: isNoSuchMethod(e),
    message: e && e.message !== undefined ? e.message : String(e),
  };
}

/** The parameters as sent: `token:SECRET` first, except for `system.*` methods or without a secret. */
export function withToken(method, params, token) {
  return method.startsWith('system.') || token === null ? params : [`token:${token}`, ...params];
}

/** One JSON-RPC 2.0 request object. */
export function request(id, method, params, token) {
  return { jsonrpc: '2.0', id, method, params: withToken(method, params, token) };
}

/**
 * One frame from the WebSocket: `{kind: 'answer', id, result}` or `{kind: 'answer', id, error}` (an RpcError) for
 * a message with an id, `{kind: 'notification', method, params}` for one without, null for anything else.
 */
export function parseMessage(text) {
  let msg;
  try { msg = JSON.parse(text); } catch (_) { return null; }
  if (!msg || typeof msg !== 'object' || Array.isArray(msg)) return null;
  if ('id' in msg && msg.id !== null) {
    if (msg.error) return { kind: 'answer', id: msg.id, error: new RpcError(msg.error.code, messageOf(msg.error)) };
    return { kind: 'answer', id: msg.id, result: msg.result };
  }
  if (typeof msg.method === 'string') {
    return { kind: 'notification', method: msg.method, params: Array.isArray(msg.params) ? msg.params : [] };
  }
  return null;
}

const messageOf = (error) => String(error.message ?? 'error');

/** The result of an HTTP POST's answer (status and body text); throws an RpcError or an Error for a failure. */
export function postAnswer(status, text) {
  if (status === 401) throw new RpcError(401, 'Unauthorized');
  let body;
  try { body = JSON.parse(text); } catch (_) {
    throw new Error(`the daemon answered HTTP ${status} without JSON`);
  }
  if (body && body.error) throw new RpcError(body.error.code, messageOf(body.error));
  if (!body || typeof body !== 'object' || !('result' in body)) {
    throw new Error('the daemon sent an answer without a result');
  }
  return body.result;
}

/** `jsonrpc` next to the page, for POST and for the WebSocket (`ws:` or `wss:` after the page's scheme). */
export function endpoints(pageHref) {
  const here = new URL('jsonrpc', pageHref);
  here.hash = '';
  here.search = '';
  const ws = new URL(here.href);
  ws.protocol = here.protocol === 'https:' ? 'wss:' : 'ws:';
  return { httpUrl: here.href, wsUrl: ws.href };
}

/**
 * `#token=SECRET` in the address: the secret and the fragment to leave in its place (`''` or `#rest`), or null when
 * the fragment has no `token`.
 */
export function tokenInHash(hash) {
  if (!hash || hash.length < 2) return null;
  const params = new URLSearchParams(hash.slice(1));
  const token = params.get('token');
  if (token === null) return null;
  params.delete('token');
  const rest = params.toString();
  return { token, hash: rest ? `#${rest}` : '' };
}

/**
 * One connection to the daemon. `openSocket` tries the WebSocket; until it is open (or if it never opens) each
 * `call` is an HTTP POST. `onNotification(method, params)` gets the daemon's notifications; `onClose()` is called
 * when an open socket closes without `close()`.
 */
export class RpcClient {
  constructor(token, pageHref) {
    const { httpUrl, wsUrl } = endpoints(pageHref);
    this.httpUrl = httpUrl;
    this.wsUrl = wsUrl;
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
    const msg = parseMessage(text);
    if (msg === null) return;
    if (msg.kind === 'answer') {
      const p = this.pending.get(msg.id);
      if (!p) return;
      this.pending.delete(msg.id);
      if (msg.error) p.reject(msg.error);
      else p.resolve(msg.result);
    } else {
      this.onNotification(msg.method, msg.params);
    }
  }

  call(method, params = []) {
    const id = this.nextId++;
    const body = request(id, method, params, this.token);
    if (this.ws && this.ws.readyState === WebSocket.OPEN) {
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          if (this.pending.delete(id)) reject(new Error(`${method} timed out`));
        }, CALL_TIMEOUT_MS);
        this.pending.set(id, {
          resolve: (v) => { clearTimeout(timer); resolve(v); },
          reject: (e) => { clearTimeout(timer); reject(e); },
        });
        this.ws.send(JSON.stringify(body));
      });
    }
    return this.post(body);
  }

  async post(body) {
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), CALL_TIMEOUT_MS);
    let response;
    try {
      response = await fetch(this.httpUrl, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify(body),
        cache: 'no-store',
        credentials: 'same-origin',
        signal: controller.signal,
      });
    } finally {
      clearTimeout(timer);
    }
    let text = '';
    if (response.status !== 401) {
      try { text = await response.text(); } catch (_) { /* no body: not JSON, said below */ }
    }
    return postAnswer(response.status, text);
  }

  close() {
    this.closed = true;
    if (this.ws) { try { this.ws.close(); } catch (_) { /* ignore */ } }
    this.ws = null;
  }
}

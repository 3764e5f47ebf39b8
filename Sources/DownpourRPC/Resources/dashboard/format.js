// Numbers and names as the page writes them. Pure: no DOM, no clock; `node --test Tests/Dashboard/` imports it.

const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];

/** A JSON-RPC number (aria2 sends strings) as a number; anything else is 0. */
export const num = (x) => Number(x) || 0;

/** `1536` → `1.50 KiB`: three significant digits at most, binary units. */
export function fmtBytes(n) {
  n = Number(n) || 0;
  let i = 0;
  while (n >= 1024 && i < UNITS.length - 1) { n /= 1024; i++; }
  const digits = i === 0 || n >= 100 ? 0 : n >= 10 ? 1 : 2;
  return `${n.toFixed(digits)} ${UNITS[i]}`;
}

export const fmtSpeed = (n) => `${fmtBytes(n)}/s`;

/** Seconds left as `42 s`, `3:07` or `1:02:03`; nothing when unknown. */
export function fmtEta(seconds) {
  if (!isFinite(seconds) || seconds < 0) return '';
  seconds = Math.ceil(seconds);
  if (seconds < 60) return `${seconds} s`;
  const h = Math.floor(seconds / 3600);
  const m = Math.floor((seconds % 3600) / 60);
  const s = seconds % 60;
  const pad = (x) => String(x).padStart(2, '0');
  return h > 0 ? `${h}:${pad(m)}:${pad(s)}` : `${m}:${pad(s)}`;
}

/** `500K`, `10M`, `2g`, `1024` → bytes; null when it is none of these. */
export function parseSize(text) {
  const m = /^\s*([0-9]+)\s*([kmg]?)\s*$/i.exec(String(text ?? ''));
  if (!m) return null;
  const mult = { '': 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 }[m[2].toLowerCase()];
  return Number(m[1]) * mult;
}

/** The last part of a path, `/` or `\` separated; '' when there is none. */
export function lastSegment(path) {
  const parts = String(path).split(/[\\/]/).filter(Boolean);
  return parts.length ? parts[parts.length - 1] : '';
}

/** What a person calls a download: its file's name, else its URL's last part (or host), else its GID. */
export function downloadName(s) {
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

/** A URL's `host[:port]`; the text itself when it is no URL. */
export function hostOf(url) {
  try {
    return new URL(url).host;
  } catch {
    return url;
  }
}

// The add form and the speed limit, read into what the RPC takes, or the sentence that says what is wrong.
// Pure: app.js reads the inputs and shows the result.

import { parseSize } from './format.js';

/**
 * The add form's fields (strings as typed) → `{lines, options}`: one download per non-empty line (mirrors
 * separated by spaces) and aria2's options, all values strings; or `{error}`.
 */
export function parseAddForm({ uris = '', dir = '', out = '', split = '', checksum = '' }) {
  const lines = uris.split(/\r?\n/).map((l) => l.trim()).filter(Boolean);
  if (!lines.length) return { error: 'Enter at least one URL.' };
  const options = {};
  dir = dir.trim();
  out = out.trim();
  split = split.trim();
  checksum = checksum.trim();
  if (dir) options.dir = dir;
  if (out) {
    if (lines.length > 1) return { error: 'A file name applies to one download; leave it empty for several lines.' };
    if (/[\\/]/.test(out) || out === '.' || out === '..') return { error: 'The file name cannot contain a slash.' };
    options.out = out;
  }
  if (split) {
    const n = Number(split);
    if (!Number.isInteger(n) || n < 1) return { error: 'Connections must be a whole number from 1.' };
    options.split = String(n);
    options['max-connection-per-server'] = String(Math.min(n, 16)); // aria2's cap
  }
  if (checksum) {
    if (/^[0-9a-f]{64}$/i.test(checksum)) checksum = `sha-256=${checksum}`;
    if (!/^[a-z0-9-]+=[0-9a-f]+$/i.test(checksum)) {
      return { error: 'Checksum: TYPE=HEX, for example sha-256=9f86d0…, or a bare SHA-256 in hex.' };
    }
    const [type, hex] = checksum.split('=');
    options.checksum = `${type.toLowerCase()}=${hex.toLowerCase()}`;
    if (lines.length > 1) return { error: 'A checksum applies to one download; add the lines one at a time.' };
  }
  for (const [i, line] of lines.entries()) {
    for (const uri of line.split(/\s+/)) {
      if (!/^[a-z][a-z0-9+.-]*:\S+$/i.test(uri)) return { error: `Line ${i + 1}: “${uri}” is not a URL.` };
    }
  }
  return { lines, options };
}

/** The URLs of one line of the add form: the download and its mirrors. */
export const urisOfLine = (line) => line.split(/\s+/);

/**
 * The speed limit as typed (empty: none) → `{value, bytes}`, `value` as aria2 takes it (`500K`, `10M`, `0`) and
 * `bytes` per second; or `{error}`.
 */
export function parseLimit(typed) {
  const text = String(typed ?? '').trim() || '0';
  const bytes = parseSize(text);
  if (bytes === null) return { error: 'Use bytes per second, for example 500K or 10M (0 for none).' };
  return { value: text.replace(/\s+/g, '').toUpperCase(), bytes };
}

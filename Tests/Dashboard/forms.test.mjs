// forms.js: the add form and the speed limit, read into what the RPC takes.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { parseAddForm, parseLimit, urisOfLine } from '../../Sources/DownpourRPC/Resources/dashboard/forms.js';

const SHA = '9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08';

test('parseAddForm: lines and options, or what is wrong', () => {
  const rows = [
    [{ uris: 'http://h/a.iso' }, { lines: ['http://h/a.iso'], options: {} }],
    [{ uris: '  http://h/a.iso   http://m/a.iso \r\n\n ftp://h/b.bin\n' },
      { lines: ['http://h/a.iso   http://m/a.iso', 'ftp://h/b.bin'], options: {} }],
    [{ uris: 'http://h/a.iso', dir: ' /dl ', out: ' a.iso ', split: '4', checksum: `SHA-256=${SHA.toUpperCase()}` },
      { lines: ['http://h/a.iso'],
        options: {
          dir: '/dl', out: 'a.iso', split: '4', 'max-connection-per-server': '4', checksum: `sha-256=${SHA}`,
        } }],
    [{ uris: 'http://h/a.iso', split: '32' },
      { lines: ['http://h/a.iso'], options: { split: '32', 'max-connection-per-server': '16' } }],
    [{ uris: 'http://h/a.iso', checksum: SHA }, { lines: ['http://h/a.iso'], options: { checksum: `sha-256=${SHA}` } }],
    [{ uris: 'magnet:?xt=urn:btih:abc' }, { lines: ['magnet:?xt=urn:btih:abc'], options: {} }],
    [{ uris: ' \n ' }, { error: 'Enter at least one URL.' }],
    [{ uris: 'http://h/a\nhttp://h/b', out: 'x' },
      { error: 'A file name applies to one download; leave it empty for several lines.' }],
    [{ uris: 'http://h/a', out: 'd/x' }, { error: 'The file name cannot contain a slash.' }],
    [{ uris: 'http://h/a', out: 'd\\x' }, { error: 'The file name cannot contain a slash.' }],
    [{ uris: 'http://h/a', out: '..' }, { error: 'The file name cannot contain a slash.' }],
    [{ uris: 'http://h/a', split: '0' }, { error: 'Connections must be a whole number from 1.' }],
    [{ uris: 'http://h/a', split: '2.5' }, { error: 'Connections must be a whole number from 1.' }],
    [{ uris: 'http://h/a', checksum: 'md5:abc' },
      { error: 'Checksum: TYPE=HEX, for example sha-256=9f86d0…, or a bare SHA-256 in hex.' }],
    [{ uris: 'http://h/a', checksum: 'abc' },
      { error: 'Checksum: TYPE=HEX, for example sha-256=9f86d0…, or a bare SHA-256 in hex.' }],
    [{ uris: 'http://h/a\nhttp://h/b', checksum: SHA },
      { error: 'A checksum applies to one download; add the lines one at a time.' }],
    [{ uris: 'http://h/a\nwww.example.org/b' }, { error: 'Line 2: “www.example.org/b” is not a URL.' }],
    [{ uris: 'http://h/a mirror' }, { error: 'Line 1: “mirror” is not a URL.' }],
  ];
  for (const [fields, expected] of rows) assert.deepEqual(parseAddForm(fields), expected, JSON.stringify(fields));
});

test('urisOfLine: a download and its mirrors', () => {
  assert.deepEqual(urisOfLine('http://h/a.iso   http://m/a.iso'), ['http://h/a.iso', 'http://m/a.iso']);
});

test('parseLimit: aria2\'s value and the bytes, empty for none', () => {
  const rows = [
    ['2M', { value: '2M', bytes: 2 * 1024 ** 2 }],
    [' 500 k ', { value: '500K', bytes: 500 * 1024 }],
    ['0', { value: '0', bytes: 0 }],
    ['', { value: '0', bytes: 0 }],
    ['   ', { value: '0', bytes: 0 }],
    ['1.5M', { error: 'Use bytes per second, for example 500K or 10M (0 for none).' }],
    ['fast', { error: 'Use bytes per second, for example 500K or 10M (0 for none).' }],
  ];
  for (const [typed, expected] of rows) assert.deepEqual(parseLimit(typed), expected, typed);
});

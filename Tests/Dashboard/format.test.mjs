// format.js: numbers and names as the page writes them.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import {
  downloadName, fmtBytes, fmtEta, fmtSpeed, hostOf, lastSegment, num, parseSize,
} from '../../Sources/DownpourRPC/Resources/dashboard/format.js';

test('fmtBytes: three significant digits at most, binary units', () => {
  const rows = [
    [0, '0 B'],
    [1, '1 B'],
    [1023, '1023 B'],
    [1024, '1.00 KiB'],
    [1536, '1.50 KiB'],
    [10 * 1024, '10.0 KiB'],
    [99.5 * 1024, '99.5 KiB'],
    [100 * 1024, '100 KiB'],
    [1023 * 1024, '1023 KiB'],
    [1024 ** 2, '1.00 MiB'],
    ['2097152', '2.00 MiB'], // aria2 sends numbers as strings
    [5.5 * 1024 ** 3, '5.50 GiB'],
    [1024 ** 4, '1.00 TiB'],
    [1024 ** 5, '1024 TiB'], // no unit above TiB
    ['not a number', '0 B'],
    [undefined, '0 B'],
  ];
  for (const [n, text] of rows) assert.equal(fmtBytes(n), text, `fmtBytes(${n})`);
});

test('fmtSpeed is fmtBytes per second', () => {
  assert.equal(fmtSpeed(0), '0 B/s');
  assert.equal(fmtSpeed(2 * 1024 ** 2), '2.00 MiB/s');
});

test('fmtEta: seconds, minutes:seconds, hours:minutes:seconds; nothing when unknown', () => {
  const rows = [
    [NaN, ''],
    [Infinity, ''],
    [-1, ''],
    [0, '0 s'],
    [0.2, '1 s'], // rounded up: never "0 s" while bytes are left
    [59, '59 s'],
    [59.5, '1:00'],
    [60, '1:00'],
    [61, '1:01'],
    [3599, '59:59'],
    [3600, '1:00:00'],
    [3723, '1:02:03'],
    [100 * 3600, '100:00:00'],
  ];
  for (const [s, text] of rows) assert.equal(fmtEta(s), text, `fmtEta(${s})`);
});

test('parseSize: a whole number with an optional K, M or G (binary); anything else is null', () => {
  const rows = [
    ['0', 0],
    ['1024', 1024],
    ['500K', 500 * 1024],
    ['500k', 500 * 1024],
    ['10M', 10 * 1024 ** 2],
    [' 2 g ', 2 * 1024 ** 3],
    ['1.5M', null],
    ['-1', null],
    ['10T', null],
    ['M', null],
    ['', null],
    [null, null],
    [undefined, null],
  ];
  for (const [text, bytes] of rows) assert.equal(parseSize(text), bytes, `parseSize(${JSON.stringify(text)})`);
});

test('lastSegment splits on / and \\', () => {
  assert.equal(lastSegment('/dl/a/file.iso'), 'file.iso');
  assert.equal(lastSegment('C:\\dl\\file.iso'), 'file.iso');
  assert.equal(lastSegment('/dl/dir/'), 'dir');
  assert.equal(lastSegment('/'), '');
  assert.equal(lastSegment(''), '');
});

test('downloadName: the file, else the URL (decoded) or its host, else the GID', () => {
  const rows = [
    [{ gid: 'g', files: [{ path: '/dl/extra.bin', uris: [{ uri: 'http://h/other.bin' }] }] }, 'extra.bin'],
    [{ gid: 'g', files: [{ path: '', uris: [{ uri: 'http://h/dir/a%20b%3Cimg%3E.bin?x=1' }] }] }, 'a b<img>.bin'],
    [{ gid: 'g', files: [{ uris: [{ uri: 'http://example.org:8080/' }] }] }, 'example.org:8080'],
    [{ gid: 'g', files: [{ uris: [{ uri: 'not a url' }] }] }, 'not a url'],
    [{ gid: 'g', files: [{ uris: [] }] }, 'g'],
    [{ gid: 'g' }, 'g'],
    [{}, '?'],
  ];
  for (const [s, name] of rows) assert.equal(downloadName(s), name, JSON.stringify(s));
});

test('hostOf: the host of a URL, the text itself otherwise', () => {
  assert.equal(hostOf('http://b.example:81/f'), 'b.example:81');
  assert.equal(hostOf('mirror-b'), 'mirror-b');
});

test('num: aria2 strings as numbers, anything else 0', () => {
  assert.equal(num('17'), 17);
  assert.equal(num(undefined), 0);
  assert.equal(num('x'), 0);
});

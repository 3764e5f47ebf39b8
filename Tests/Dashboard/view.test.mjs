// view.js: what the page shows, worked out as data.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import {
  actionsFor, connectionsText, doneRanges, graphTop, niceCeiling, nodesView, racingIds, rowView, sampleRuns, statusOf,
  summary,
  visibleLists,
} from '../../Sources/DownpourRPC/Resources/dashboard/view.js';

const KiB = 1024;
const MiB = 1024 ** 2;

test('visibleLists: one row per download; stopped wins, then active; entries without a GID dropped', () => {
  const data = {
    active: [{ gid: 'a', status: 'active' }, { gid: 'x', status: 'active' }, null],
    waiting: [{ gid: 'w' }, { gid: 'a', status: 'waiting' }, { status: 'waiting' }],
    stopped: [{ gid: 'x', status: 'complete' }],
  };
  const lists = visibleLists(data);
  assert.deepEqual(lists.stopped, [{ gid: 'x', status: 'complete' }]);
  assert.deepEqual(lists.active, [{ gid: 'a', status: 'active' }]);
  assert.deepEqual(lists.waiting, [{ gid: 'w' }]);
  assert.deepEqual([...lists.gids].sort(), ['a', 'w', 'x']);
});

test('statusOf: a stopped status wins over an older active or waiting one', () => {
  const data = {
    active: [{ gid: 'a', status: 'active' }],
    waiting: [{ gid: 'a', status: 'waiting' }, { gid: 'w', status: 'paused' }],
    stopped: [{ gid: 'a', status: 'error' }],
  };
  assert.equal(statusOf(data, 'a').status, 'error');
  assert.equal(statusOf(data, 'w').status, 'paused');
  assert.equal(statusOf(data, 'nobody'), null);
});

test('actionsFor: the buttons by status', () => {
  const rows = [
    ['active', ['Pause', 'Remove']],
    ['waiting', ['Pause', 'Move up', 'Move down', 'Remove']],
    ['paused', ['Resume', 'Move up', 'Move down', 'Remove']],
    ['error', ['Retry', 'Remove']],
    ['complete', ['Remove']],
    ['removed', ['Remove']],
  ];
  for (const [status, actions] of rows) assert.deepEqual(actionsFor(status), actions, status);
});

test('rowView: status, label, progress and the line of numbers', () => {
  const file = { path: '/dl/f.iso', uris: [{ uri: 'http://h/f.iso' }] };
  const rows = [
    [{ status: 'active', totalLength: String(24 * MiB), completedLength: String(5 * MiB),
      downloadSpeed: String(MiB), connections: '4', files: [file] }, 'active',
    { status: 'active', label: 'Downloading', name: 'f.iso', total: 24 * MiB, percent: 20,
      stats: '5.00 MiB / 24.0 MiB · 20% · 1.00 MiB/s · ETA 19 s · 4 connections', failure: '', showMap: true }],
    [{ status: 'active', totalLength: '0', completedLength: '2048', downloadSpeed: '0', connections: '1', gid: 'g' },
      'active',
    { status: 'active', label: 'Downloading', name: 'g', total: 0, percent: null,
      stats: '2.00 KiB / size unknown · 0 B/s · 1 connection', failure: '', showMap: false }],
    [{ gid: 'g', totalLength: '100', completedLength: '100' }, 'active', // no status: the list's
    { status: 'active', label: 'Downloading', name: 'g', total: 100, percent: 100,
      stats: '100 B / 100 B · 100% · 0 B/s · 0 connections', failure: '', showMap: true }],
    [{ gid: 'g', totalLength: '100', completedLength: '3' }, 'waiting',
    { status: 'waiting', label: 'Queued', name: 'g', total: 100, percent: 3, stats: '3 B / 100 B · 3%', failure: '',
      showMap: false }],
    [{ gid: 'g', status: 'paused', totalLength: '300', completedLength: '200' }, 'waiting',
    { status: 'paused', label: 'Paused', name: 'g', total: 300, percent: 66, stats: '200 B / 300 B · 66%', failure: '',
      showMap: false }],
    [{ gid: 'g', status: 'complete', totalLength: '0', completedLength: '0' }, 'stopped',
    { status: 'complete', label: 'Complete', name: 'g', total: 0, percent: 100, stats: '0 B / size unknown',
      failure: '', showMap: false }],
    [{ gid: 'g', status: 'error', errorCode: '3', errorMessage: ' Resource not found (404) ', totalLength: '0',
      completedLength: '0' }, 'stopped',
    { status: 'error', label: 'Failed', name: 'g', total: 0, percent: null, stats: '',
      failure: 'Resource not found (404)', showMap: false }],
    [{ gid: 'g', status: 'error', errorCode: '9', totalLength: '10', completedLength: '5' }, 'stopped',
    { status: 'error', label: 'Failed', name: 'g', total: 10, percent: 50, stats: '5 B / 10 B · 50%',
      failure: 'Failed with error code 9', showMap: false }],
    [{ gid: 'g', status: 'error' }, 'stopped',
    { status: 'error', label: 'Failed', name: 'g', total: 0, percent: null, stats: '',
      failure: 'Failed with error code ?', showMap: false }],
    [{ gid: 'g', status: 'removed', totalLength: '0', completedLength: '0' }, 'stopped',
    { status: 'removed', label: 'Removed', name: 'g', total: 0, percent: null, stats: '', failure: '',
      showMap: false }],
    [{ gid: 'g', status: 'somethingNew' }, 'stopped',
    { status: 'somethingNew', label: 'somethingNew', name: 'g', total: 0, percent: null, stats: '0 B / size unknown',
      failure: '', showMap: false }],
  ];
  for (const [s, kind, view] of rows) assert.deepEqual(rowView(s, kind), view, JSON.stringify(s));
});

test('rowView: a fleet names the node an active download runs on', () => {
  const s = { gid: 'g', status: 'active', totalLength: '100', completedLength: '50', downloadSpeed: '0',
    connections: '2', node: 'rack-2:6800' };
  assert.equal(rowView(s, 'active').stats, '50 B / 100 B · 50% · 0 B/s · 2 connections · on rack-2:6800');
  assert.equal(rowView({ ...s, node: '' }, 'active').stats, '50 B / 100 B · 50% · 0 B/s · 2 connections');
});

test('nodesView: a fleet\'s nodes, each with where it listens and what it does, or how long it has been silent', () => {
  assert.deepEqual(nodesView(undefined), []);
  assert.deepEqual(nodesView([]), []);
  assert.deepEqual(nodesView([
    { name: 'a', address: '127.0.0.1:6800', downloadSpeed: String(MiB), numActive: '2', up: 'true' },
    { name: 'b', address: '', downloadSpeed: '0', numActive: '0', secondsSinceSeen: '42', up: 'false' },
    { address: 'no name' },
    null,
  ]), [
    { name: 'a', up: true, text: '127.0.0.1:6800 · 1.00 MiB/s · 2 active' },
    { name: 'b', up: false, text: 'not heard from for 42 s' },
  ]);
});

test('racingIds: connections whose remaining ranges overlap', () => {
  assert.deepEqual([...racingIds([])], []);
  assert.deepEqual([...racingIds([{ id: 1, start: 0, end: 10 }, { id: 2, start: 10, end: 20 }])], []); // touching
  assert.deepEqual([...racingIds([
    { id: 1, start: 0, end: 10 }, { id: 2, start: 20, end: 30 }, { id: 3, start: '25', end: '40' },
  ])].sort(), [2, 3]);
});

test('connectionsText: speed, source, racing, restarts, and how many opened so far', () => {
  assert.equal(connectionsText(undefined, 0), ''); // a plain aria2 sends no connectionRanges
  assert.equal(connectionsText([], 0), 'no connection open');
  assert.equal(connectionsText([], 3), 'no connection open · 3 connections opened so far');
  const conns = [
    { id: 1, start: 0, end: 100, downloadSpeed: String(256 * KiB), restarts: 0 },
    { id: 2, start: 50, end: 100, downloadSpeed: '1024', restarts: 2, source: 'http://b.example/f' },
    { id: 3, start: 200, end: 300, downloadSpeed: '0', source: 'not a url' },
  ];
  assert.equal(connectionsText(conns, 3),
    '#1 256 KiB/s (racing) · #2 1.00 KiB/s from b.example (racing) (restarted ×2) · #3 0 B/s from not a url');
  assert.equal(connectionsText(conns.slice(0, 1), 4), '#1 256 KiB/s · 4 connections opened so far');
});

test('doneRanges: the push\'s ranges as they are, else aria2\'s bitfield in pieces', () => {
  assert.deepEqual(doneRanges({ ranges: [[0, 5], [9, 12]] }, 12), [[0, 5], [9, 12]]);
  // Pieces of 10 bytes, 4 pieces, the last one short (35 bytes): 0xa = 1010.
  assert.deepEqual(doneRanges({ bitfield: 'a', pieceLength: '10', numPieces: '4' }, 35), [[0, 10], [20, 30]]);
  assert.deepEqual(doneRanges({ bitfield: 'f', pieceLength: '10', numPieces: '4' }, 35), [[0, 35]]);
  // Two hex digits, 6 pieces: 0x3c = 0011 1100 → pieces 2 to 5.
  assert.deepEqual(doneRanges({ bitfield: '3c', pieceLength: '4', numPieces: '6' }, 24), [[8, 24]]);
  assert.deepEqual(doneRanges({ bitfield: '', pieceLength: '10', numPieces: '4' }, 35), []);
  assert.deepEqual(doneRanges({}, 35), []);
});

test('summary: the totals, the limit and the title', () => {
  const lists = { active: [{}], waiting: [{}, {}], stopped: [] };
  assert.deepEqual(summary({ stat: { downloadSpeed: String(3 * MiB) }, limit: String(2 * MiB) }, lists), {
    speedNow: '3.00 MiB/s', counts: '· 1 active, 2 queued', limitNow: 'now 2.00 MiB/s', limitPlaceholder: '2.00 MiB',
    title: '3.00 MiB/s · Downpour',
  });
  assert.deepEqual(summary({ stat: {}, limit: '0' }, { active: [], waiting: [], stopped: [] }), {
    speedNow: '0 B/s', counts: '· 0 active, 0 queued', limitNow: 'now none', limitPlaceholder: 'none',
    title: 'Downpour',
  });
  assert.equal(summary({ stat: {}, limit: null }, lists).limitNow, ''); // not known yet
});

test('niceCeiling: 1, 2 or 5 × 10^k of KiB, MiB, GiB or TiB', () => {
  const rows = [
    [1, KiB],
    [KiB, KiB],
    [1.1 * KiB, 2 * KiB],
    [3 * KiB, 5 * KiB],
    [900 * KiB, 1000 * KiB],
    [999 * KiB, 1000 * KiB],
    [1000 * KiB, 1 * MiB],
    [1.5 * MiB, 2 * MiB],
    [120 * MiB, 200 * MiB],
    [3 * 1024 ** 3, 5 * 1024 ** 3],
  ];
  for (const [v, top] of rows) assert.equal(niceCeiling(v), top, `niceCeiling(${v})`);
});

test('graphTop: the highest recent sample plus a tenth, the limit when near, 1 KiB/s at least', () => {
  const samples = [{ t: 0, v: 50 * MiB }, { t: 100, v: MiB }];
  assert.equal(graphTop(samples, 50, 0), 2 * MiB); // the old 50 MiB/s is out of the window
  assert.equal(graphTop(samples, 50, 2 * MiB), 5 * MiB); // 2.2 MiB/s for a limit within 3 × the top speed
  assert.equal(graphTop(samples, 50, 10 * MiB), 2 * MiB); // a far limit does not flatten the line
  assert.equal(graphTop([], 0, 0), KiB);
});

test('sampleRuns: broken where two samples are more than 5 s apart; older than the window less 1 s dropped', () => {
  const p = (t) => ({ t, v: 1 });
  assert.deepEqual(sampleRuns([], 0), []);
  assert.deepEqual(sampleRuns([p(8000), p(9500), p(10_000), p(15_000), p(20_001), p(21_000)], 10_000),
    [[p(9500), p(10_000), p(15_000)], [p(20_001), p(21_000)]]);
});

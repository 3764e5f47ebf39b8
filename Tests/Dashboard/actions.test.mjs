// actions.js: a row's buttons as RPC calls, against a recording stand-in for the client.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { runAction } from '../../Sources/DownpourRPC/Resources/dashboard/actions.js';
import { RpcError } from '../../Sources/DownpourRPC/Resources/dashboard/rpc.js';

/** A client whose answers are given per method (a function of the call's number for that method). */
function fakeClient(answers = {}) {
  const calls = [];
  const sleeps = [];
  const counts = {};
  return {
    calls,
    sleeps,
    call: async (method, params = []) => {
      calls.push([method, params]);
      const n = (counts[method] = (counts[method] || 0) + 1);
      const answer = answers[method];
      const value = typeof answer === 'function' ? answer(n) : answer === undefined ? 'OK' : answer;
      if (value instanceof Error) throw value;
      return value;
    },
    sleep: async (ms) => { sleeps.push(ms); },
  };
}

const notFound = () => new RpcError(1, 'Active Download not found for GID#g');
const waiting = [{ gid: 'w1' }, { gid: 'g' }, { gid: 'w3' }];

test('Pause, Resume, and the moves: one call each', async () => {
  const rows = [
    ['Pause', { gid: 'g', status: 'active' }, [['aria2.forcePause', ['g']]]],
    ['Resume', { gid: 'g', status: 'paused' }, [['aria2.unpause', ['g']]]],
    ['Move up', { gid: 'g', status: 'waiting' }, [['aria2.changePosition', ['g', 0, 'POS_SET']]]],
    ['Move down', { gid: 'g', status: 'paused' }, [['aria2.changePosition', ['g', 2, 'POS_SET']]]],
    ['Move up', { gid: 'w1', status: 'waiting' }, [['aria2.changePosition', ['w1', 0, 'POS_SET']]]],
    ['Move down', { gid: 'gone', status: 'waiting' }, []], // no longer in the queue: nothing
    ['Explode', { gid: 'g', status: 'active' }, []],
  ];
  for (const [action, s, calls] of rows) {
    const client = fakeClient();
    await runAction(action, s, waiting, client);
    assert.deepEqual(client.calls, calls, `${action} on ${s.gid}`);
  }
});

test('Remove of a stopped download drops its result only', async () => {
  for (const status of ['complete', 'error', 'removed']) {
    const client = fakeClient();
    await runAction('Remove', { gid: 'g', status }, [], client);
    assert.deepEqual(client.calls, [['aria2.removeDownloadResult', ['g']]], status);
  }
});

test('Remove of an active download: forceRemove, then its result once it has stopped (250 ms apart)', async () => {
  const client = fakeClient({ 'aria2.removeDownloadResult': (n) => (n < 4 ? notFound() : 'OK') });
  await runAction('Remove', { gid: 'g', status: 'active' }, [], client);
  assert.deepEqual(client.calls, [
    ['aria2.forceRemove', ['g']],
    ...Array(4).fill(['aria2.removeDownloadResult', ['g']]),
  ]);
  assert.deepEqual(client.sleeps, [250, 250, 250]);
});

test('Remove of an active download that never stops: 20 tries, then given up without an error', async () => {
  const client = fakeClient({ 'aria2.removeDownloadResult': notFound });
  await runAction('Remove', { gid: 'g', status: 'active' }, [], client);
  assert.equal(client.calls.filter(([m]) => m === 'aria2.removeDownloadResult').length, 20);
  assert.equal(client.sleeps.length, 20);
});

test('Remove of a queued download: aria2 keeps no result, so two tries and no error', async () => {
  const client = fakeClient({ 'aria2.removeDownloadResult': notFound });
  await runAction('Remove', { gid: 'g', status: 'paused' }, [], client);
  assert.deepEqual(client.calls, [
    ['aria2.forceRemove', ['g']],
    ['aria2.removeDownloadResult', ['g']],
    ['aria2.removeDownloadResult', ['g']],
  ]);
});

test('Remove refused while waiting for the result: the refusal is thrown at once', async () => {
  const client = fakeClient({ 'aria2.removeDownloadResult': () => new RpcError(1, 'Unauthorized') });
  await assert.rejects(runAction('Remove', { gid: 'g', status: 'active' }, [], client), /Unauthorized/);
  assert.equal(client.calls.length, 2);
});

test('Retry: the same URLs (once each) with the same options, then the failed one dropped', async () => {
  const options = { dir: '/dl', split: '4' };
  const client = fakeClient({ 'aria2.getOption': options, 'aria2.removeDownloadResult': notFound });
  const s = {
    gid: 'g', status: 'error',
    files: [{ uris: [{ uri: 'http://a/f' }, { uri: 'http://b/f' }, { uri: 'http://a/f' }, { uri: '' }] }],
  };
  await runAction('Retry', s, [], client); // the result's removal may fail: ignored
  assert.deepEqual(client.calls, [
    ['aria2.getOption', ['g']],
    ['aria2.addUri', [['http://a/f', 'http://b/f'], options]],
    ['aria2.removeDownloadResult', ['g']],
  ]);
});

test('Retry without a URL left: an error, nothing added', async () => {
  const client = fakeClient({ 'aria2.getOption': null });
  await assert.rejects(runAction('Retry', { gid: 'g', status: 'error', files: [] }, [], client),
    /this download has no URL left to retry/);
  assert.deepEqual(client.calls, [['aria2.getOption', ['g']]]);
});

test('a failed call is thrown to the caller', async () => {
  const client = fakeClient({ 'aria2.forcePause': new RpcError(1, 'GID g is not found') });
  await assert.rejects(runAction('Pause', { gid: 'g', status: 'active' }, [], client), /GID g is not found/);
});

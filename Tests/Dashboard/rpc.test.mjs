// rpc.js: requests with the secret, answers and notifications told apart, errors classified.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import {
  LIST_KEYS, RpcClient, RpcError, endpoints, errorInfo, isNoSuchMethod, isUnauthorized, parseMessage, postAnswer,
  request, tokenInHash, withToken,
} from '../../Sources/DownpourRPC/Resources/dashboard/rpc.js';

test('withToken: token:SECRET first, except for system.* and without a secret', () => {
  const rows = [
    ['aria2.tellActive', [['gid']], 's3', ['token:s3', ['gid']]],
    ['aria2.getGlobalStat', [], 's3', ['token:s3']],
    ['aria2.getGlobalStat', [], null, []],
    ['system.listMethods', [], 's3', []],
    ['aria2.addUri', [['http://h/f'], { dir: '/d' }], '', ['token:', ['http://h/f'], { dir: '/d' }]],
  ];
  for (const [method, params, token, sent] of rows) {
    assert.deepEqual(withToken(method, params, token), sent, `${method} with ${token}`);
  }
});

test('request: a JSON-RPC 2.0 object', () => {
  assert.deepEqual(request(7, 'aria2.forcePause', ['2089b05ecca3d829'], 'S'), {
    jsonrpc: '2.0', id: 7, method: 'aria2.forcePause', params: ['token:S', '2089b05ecca3d829'],
  });
  assert.deepEqual(request(1, 'downpour.subscribe', [], 'S').params, ['token:S']);
});

test('parseMessage: answers by id, notifications without one, nothing else', () => {
  const rows = [
    ['{"id":3,"jsonrpc":"2.0","result":"OK"}', { kind: 'answer', id: 3, result: 'OK' }],
    ['{"id":"a","result":null}', { kind: 'answer', id: 'a', result: null }],
    ['{"id":4,"method":"x","result":1}', { kind: 'answer', id: 4, result: 1 }], // an id makes it an answer
    ['{"jsonrpc":"2.0","method":"aria2.onDownloadStart","params":[{"gid":"g"}]}',
      { kind: 'notification', method: 'aria2.onDownloadStart', params: [{ gid: 'g' }] }],
    ['{"id":null,"method":"downpour.onProgress","params":[{}]}',
      { kind: 'notification', method: 'downpour.onProgress', params: [{}] }],
    ['{"method":"downpour.onProgress","params":{"not":"an array"}}',
      { kind: 'notification', method: 'downpour.onProgress', params: [] }],
    ['{"method":7}', null],
    ['{"jsonrpc":"2.0"}', null],
    ['[{"id":1,"result":1}]', null], // a batch: the page sends none
    ['17', null],
    ['null', null],
    ['not json', null],
  ];
  for (const [text, expected] of rows) assert.deepEqual(parseMessage(text), expected, text);
});

test('parseMessage: an error answer carries an RpcError with the code and message', () => {
  const m = parseMessage('{"id":2,"error":{"code":1,"message":"Unauthorized"}}');
  assert.equal(m.kind, 'answer');
  assert.equal(m.id, 2);
  assert.ok(m.error instanceof RpcError);
  assert.equal(m.error.code, 1);
  assert.equal(m.error.message, 'Unauthorized');
  assert.ok(isUnauthorized(m.error));
  assert.equal(parseMessage('{"id":2,"error":{"code":-32601}}').error.message, 'error');
});

test('postAnswer: the result, or the failure as an RpcError or an Error', () => {
  assert.deepEqual(postAnswer(200, '{"id":1,"jsonrpc":"2.0","result":{"downloadSpeed":"0"}}'), { downloadSpeed: '0' });
  assert.equal(postAnswer(200, '{"id":1,"result":null}'), null);
  const failures = [
    [401, '', RpcError, 'Unauthorized'],
    [400, '{"id":1,"error":{"code":1,"message":"Unauthorized"}}', RpcError, 'Unauthorized'],
    [200, '{"id":1,"error":{"code":1,"message":"No such method: downpour.subscribe"}}', RpcError,
      'No such method: downpour.subscribe'],
    [502, '<html>Bad Gateway</html>', Error, 'the daemon answered HTTP 502 without JSON'],
    [200, '', Error, 'the daemon answered HTTP 200 without JSON'],
    [200, '{"id":1}', Error, 'the daemon sent an answer without a result'],
    [200, '3', Error, 'the daemon sent an answer without a result'],
  ];
  for (const [status, text, type, message] of failures) {
    const expected = (e) => e instanceof type && e.message === message;
    assert.throws(() => postAnswer(status, text), expected, `${status} ${text}`);
  }
  assert.throws(() => postAnswer(401, 'anything'), (e) => isUnauthorized(e) && e.code === 401);
});

test('isUnauthorized and isNoSuchMethod look at what the daemon answered only', () => {
  assert.ok(isUnauthorized(new RpcError(1, 'Unauthorized')));
  assert.ok(isUnauthorized(new RpcError(401, 'whatever a proxy says')));
  assert.ok(!isUnauthorized(new RpcError(1, 'Not Unauthorized')));
  assert.ok(!isUnauthorized(new Error('Unauthorized'))); // a transport failure is not a refusal
  assert.ok(isNoSuchMethod(new RpcError(1, 'No such method: downpour.subscribe')));
  assert.ok(isNoSuchMethod(new RpcError(-32601, 'no such method')));
  assert.ok(!isNoSuchMethod(new Error('No such method')));
});

test('errorInfo: what the connection decides on', () => {
  assert.deepEqual(errorInfo(new RpcError(1, 'Unauthorized')),
    { unauthorized: true, noSuchMethod: false, message: 'Unauthorized' });
  assert.deepEqual(errorInfo(new RpcError(1, 'No such method: x')),
    { unauthorized: false, noSuchMethod: true, message: 'No such method: x' });
  assert.deepEqual(errorInfo(new TypeError('Failed to fetch')),
    { unauthorized: false, noSuchMethod: false, message: 'Failed to fetch' });
});

test('endpoints: jsonrpc next to the page, ws: or wss: after its scheme, without query or fragment', () => {
  const rows = [
    ['http://127.0.0.1:6800/', 'http://127.0.0.1:6800/jsonrpc', 'ws://127.0.0.1:6800/jsonrpc'],
    ['http://127.0.0.1:6800/index.html?x=1#token=s', 'http://127.0.0.1:6800/jsonrpc', 'ws://127.0.0.1:6800/jsonrpc'],
    ['https://nas.example/downpour/', 'https://nas.example/downpour/jsonrpc', 'wss://nas.example/downpour/jsonrpc'],
    ['http://[::1]:6800/', 'http://[::1]:6800/jsonrpc', 'ws://[::1]:6800/jsonrpc'],
  ];
  for (const [page, httpUrl, wsUrl] of rows) assert.deepEqual(endpoints(page), { httpUrl, wsUrl }, page);
});

test('tokenInHash: the secret and the fragment to leave', () => {
  const rows = [
    ['#token=s3cret', { token: 's3cret', hash: '' }],
    ['#token=a%2Bb%26c', { token: 'a+b&c', hash: '' }],
    ['#view=all&token=s', { token: 's', hash: '#view=all' }],
    ['#token=', { token: '', hash: '' }],
    ['#view=all', null],
    ['#', null],
    ['', null],
  ];
  for (const [hash, expected] of rows) assert.deepEqual(tokenInHash(hash), expected, hash);
});

test('LIST_KEYS: what the rows need, as docs/dashboard.md lists it', () => {
  assert.deepEqual(LIST_KEYS, [
    'gid', 'status', 'totalLength', 'completedLength', 'downloadSpeed', 'connections', 'dir', 'files',
    'errorCode', 'errorMessage', 'bitfield', 'numPieces', 'pieceLength',
  ]);
});

test('RpcClient.receive: answers settle their call, notifications go to onNotification', async () => {
  const client = new RpcClient('s', 'http://127.0.0.1:6800/');
  assert.equal(client.httpUrl, 'http://127.0.0.1:6800/jsonrpc');
  assert.equal(client.wsUrl, 'ws://127.0.0.1:6800/jsonrpc');
  const settled = [];
  const pending = (id) => new Promise((resolve, reject) => client.pending.set(id, { resolve, reject }))
    .then((v) => settled.push([id, 'ok', v]), (e) => settled.push([id, 'error', e.message]));
  const one = pending(1);
  const two = pending(2);
  const notes = [];
  client.onNotification = (method, params) => notes.push([method, params]);
  client.receive('{"id":9,"result":"nobody asked"}');
  client.receive('{"id":2,"error":{"code":1,"message":"Unauthorized"}}');
  client.receive('{"method":"downpour.onProgress","params":[{"queueVersion":"3"}]}');
  client.receive('{"id":1,"result":"OK"}');
  client.receive('garbage');
  await Promise.all([one, two]);
  assert.deepEqual(settled, [[2, 'error', 'Unauthorized'], [1, 'ok', 'OK']]);
  assert.deepEqual(notes, [['downpour.onProgress', [{ queueVersion: '3' }]]]);
  assert.equal(client.pending.size, 0);
});

// connection.js: the page's connection as `next(state, event) → {state, effects}`, checked as tables: from a
// state reached by a history of events, one event → the effects in order and the fields of the state after it.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import {
  HISTORY_MS, WRONG_SECRET, addSample, initialState, next,
} from '../../Sources/DownpourRPC/Resources/dashboard/connection.js';

const T0 = 1_700_000_000_000;

// Every state handed to `next` is frozen, so a step that changed its input instead of copying it throws.
function freeze(x) {
  if (x && typeof x === 'object' && !Object.isFrozen(x)) {
    Object.freeze(x);
    for (const v of Object.values(x)) freeze(v);
  }
  return x;
}

/** Runs `events` from the initial state; `now` defaults to T0 plus a second per event. */
function run(events, state = initialState()) {
  let effects = [];
  events.forEach((event, i) => {
    const result = next(freeze(state), { now: T0 + 1000 * (i + 1), ...event });
    state = result.state;
    effects = result.effects;
  });
  return { state, effects };
}

const unauthorized = { unauthorized: true, noSuchMethod: false, message: 'Unauthorized' };
const noSuchMethod = { unauthorized: false, noSuchMethod: true, message: 'No such method: downpour.subscribe' };
const broken = (message) => ({ unauthorized: false, noSuchMethod: false, message });

const dl = (gid, status = 'active', more = {}) => ({ gid, status, totalLength: '100', completedLength: '10', ...more });

// Histories: the events that lead to a state worth starting from. `g` is the generation they end in.
const H = {
  opening: [{ type: 'start', secret: 's', secretStored: true }], // g 1
  typedSecret: [{ type: 'start', secret: null, secretStored: false }, { type: 'signIn', secret: 'typed' }], // g 2
};
H.socketOpen = [...H.opening, { type: 'socketOpened', generation: 1, open: true }];
H.noSocket = [...H.opening, { type: 'socketOpened', generation: 1, open: false }];
H.subscribing = [...H.socketOpen, { type: 'checked', generation: 1 }];
H.pushFirstPoll = [...H.subscribing, { type: 'subscribed', generation: 1, now: T0 + 10_000 }];
// Live by push: the first poll (0.5 s after the subscription) leaves the active list to the push.
H.push = [
  ...H.pushFirstPoll,
  { type: 'polled', generation: 1, stat: { downloadSpeed: '5' }, active: [dl('a')], waiting: [dl('w', 'waiting')],
    stopped: [], option: null, now: T0 + 10_500 },
];
H.pollFirstPoll = [...H.noSocket, { type: 'checked', generation: 1, now: T0 + 10_000 }];
H.poll = [
  ...H.pollFirstPoll,
  { type: 'polled', generation: 1, stat: { downloadSpeed: '7' }, active: [dl('a')], waiting: [], stopped: [],
    option: { 'max-overall-download-limit': '1048576' }, now: T0 + 10_500 },
];
H.pushListsInFlight = [
  ...H.push,
  { type: 'notification', generation: 1, method: 'downpour.onProgress', params: [{ queueVersion: '1' }],
    now: T0 + 11_000 },
];
H.signedOut = [...H.push, { type: 'signOut' }]; // g 2

const pushData = { active: [], waiting: [dl('w', 'waiting')], stopped: [], stat: { downloadSpeed: '5' }, limit: null,
  samples: [] };

const progress = (p, now = T0 + 11_000) => ({
  type: 'notification', generation: 1, method: 'downpour.onProgress', params: [p], now,
});

const signedOutEffects = (message) => [
  { type: 'stopTimers' },
  { type: 'closeClient' },
  { type: 'clearRows' },
  { type: 'showSignIn', message },
  { type: 'setConnection', text: 'Signed out', kind: '' },
];

const rows = [
  // ---------------------------------------------------------------------------------------------- connecting
  {
    name: 'the page opens with a stored secret: a new generation, its client, "Connecting…"',
    given: [],
    event: { type: 'start', secret: 's', secretStored: true },
    effects: [
      { type: 'stopTimers' },
      { type: 'setConnection', text: 'Connecting…', kind: '' },
      { type: 'openClient', generation: 1, secret: 's', timeoutMs: 4000 },
    ],
    state: { generation: 1, step: 'opening', client: true, secret: 's', secretStored: true, mode: 'connecting' },
  },
  {
    name: 'the page opens without a secret: the client tries without one',
    given: [],
    event: { type: 'start', secret: null, secretStored: false },
    effects: [
      { type: 'stopTimers' },
      { type: 'setConnection', text: 'Connecting…', kind: '' },
      { type: 'openClient', generation: 1, secret: null, timeoutMs: 4000 },
    ],
    state: { secret: null, secretStored: false },
  },
  {
    name: 'the socket opened: the secret is tested with getGlobalStat',
    given: H.opening,
    event: { type: 'socketOpened', generation: 1, open: true },
    effects: [{ type: 'check', generation: 1 }],
    state: { socket: true, step: 'checking' },
  },
  {
    name: 'no socket (HTTP POST only): tested all the same',
    given: H.opening,
    event: { type: 'socketOpened', generation: 1, open: false },
    effects: [{ type: 'check', generation: 1 }],
    state: { socket: false, step: 'checking' },
  },
  {
    name: 'a stored secret accepted, with a socket: subscribe, nothing stored again',
    given: H.socketOpen,
    event: { type: 'checked', generation: 1 },
    effects: [{ type: 'subscribe', generation: 1 }],
    state: { step: 'subscribing', secretStored: true },
  },
  {
    name: 'a typed secret accepted: stored, then subscribe',
    given: [...H.typedSecret, { type: 'socketOpened', generation: 2, open: true }],
    event: { type: 'checked', generation: 2 },
    effects: [{ type: 'storeSecret', secret: 'typed' }, { type: 'subscribe', generation: 2 }],
    state: { secretStored: true, secret: 'typed' },
  },
  {
    name: 'accepted without a socket: polling at once, the first poll asks for the limit too',
    given: H.noSocket,
    event: { type: 'checked', generation: 1, now: T0 + 5000 },
    effects: [
      { type: 'showApp', signOut: true },
      { type: 'setConnection', text: 'Live (polling: this server does not push)', kind: 'poll' },
      { type: 'poll', generation: 1, withOption: true },
    ],
    state: { mode: 'poll', step: 'firstPoll', pollInFlight: true, lastPush: T0 + 5000 },
  },
  {
    name: 'a daemon without a secret: no Sign out button',
    given: [{ type: 'start', secret: null, secretStored: false }, { type: 'socketOpened', generation: 1, open: false }],
    event: { type: 'checked', generation: 1 },
    effects: [
      { type: 'showApp', signOut: false },
      { type: 'setConnection', text: 'Live (polling: this server does not push)', kind: 'poll' },
      { type: 'poll', generation: 1, withOption: true },
    ],
    state: { secret: null, secretStored: false },
  },
  {
    name: 'subscribed: live by push; the first poll does not ask for the limit (the push carries it)',
    given: H.subscribing,
    event: { type: 'subscribed', generation: 1, now: T0 + 7000 },
    effects: [
      { type: 'showApp', signOut: true },
      { type: 'setConnection', text: 'Live', kind: 'live' },
      { type: 'poll', generation: 1, withOption: false },
    ],
    state: { mode: 'push', step: 'firstPoll', lastPush: T0 + 7000 },
  },
  {
    name: 'a plain aria2 ("No such method"): polling, without a warning',
    given: H.subscribing,
    event: { type: 'subscribeFailed', generation: 1, error: noSuchMethod },
    effects: [
      { type: 'showApp', signOut: true },
      { type: 'setConnection', text: 'Live (polling: this server does not push)', kind: 'poll' },
      { type: 'poll', generation: 1, withOption: true },
    ],
    state: { mode: 'poll' },
  },
  {
    name: 'the subscription failed otherwise: a warning, then polling',
    given: H.subscribing,
    event: { type: 'subscribeFailed', generation: 1, error: broken('downpour.subscribe timed out') },
    effects: [
      { type: 'warn', message: 'downpour.subscribe failed, polling instead:',
        error: broken('downpour.subscribe timed out') },
      { type: 'showApp', signOut: true },
      { type: 'setConnection', text: 'Live (polling: this server does not push)', kind: 'poll' },
      { type: 'poll', generation: 1, withOption: true },
    ],
    state: { mode: 'poll' },
  },
  {
    name: 'a stored secret refused: forgotten, the sign-in form says so plainly',
    given: H.socketOpen,
    event: { type: 'checkFailed', generation: 1, error: unauthorized },
    effects: [{ type: 'forgetSecret' }, ...signedOutEffects(WRONG_SECRET)],
    state: { mode: 'signin', step: 'idle', generation: 2, secret: null, secretStored: false, client: false },
  },
  {
    name: 'a typed secret refused: nothing to forget (it was never stored)',
    given: [...H.typedSecret, { type: 'socketOpened', generation: 2, open: true }],
    event: { type: 'checkFailed', generation: 2, error: unauthorized },
    effects: signedOutEffects(WRONG_SECRET),
    state: { mode: 'signin', generation: 3, secret: null },
  },
  {
    name: 'no secret and the daemon wants one: the sign-in form without a complaint',
    given: [{ type: 'start', secret: null, secretStored: false }, { type: 'socketOpened', generation: 1, open: true }],
    event: { type: 'checkFailed', generation: 1, error: unauthorized },
    effects: signedOutEffects(''),
    state: { mode: 'signin' },
  },
  {
    name: 'refused when subscribing (the socket checks the secret again)',
    given: H.subscribing,
    event: { type: 'subscribeFailed', generation: 1, error: unauthorized },
    effects: [{ type: 'forgetSecret' }, ...signedOutEffects(WRONG_SECRET)],
    state: { mode: 'signin' },
  },
  {
    name: 'the daemon cannot be reached: said, and tried again in 3 s',
    given: H.noSocket,
    event: { type: 'checkFailed', generation: 1, error: broken('Failed to fetch') },
    effects: [
      { type: 'setConnection', text: 'Cannot reach the daemon (Failed to fetch); retrying…', kind: 'down' },
      { type: 'reconnectAfter', generation: 1, ms: 3000 },
    ],
    state: { step: 'waiting', mode: 'connecting', generation: 1 },
  },
  {
    name: 'the retry is due: a new generation and client',
    given: [...H.noSocket, { type: 'checkFailed', generation: 1, error: broken('Failed to fetch') }],
    event: { type: 'reconnectDue', generation: 1 },
    effects: [
      { type: 'stopTimers' },
      { type: 'setConnection', text: 'Connecting…', kind: '' },
      { type: 'openClient', generation: 2, secret: 's', timeoutMs: 4000 },
    ],
    state: { generation: 2, step: 'opening' },
  },
  // ------------------------------------------------------------------------------------------ the first poll
  {
    name: 'the first poll answered: everything shown, then the ticks start',
    given: H.pollFirstPoll,
    event: {
      type: 'polled', generation: 1, stat: { downloadSpeed: '2048' }, active: [dl('a')], waiting: [dl('w', 'waiting')],
      stopped: [dl('s', 'complete')], option: { 'max-overall-download-limit': '0' }, now: T0 + 12_000,
    },
    effects: [{ type: 'render' }, { type: 'startTicks', generation: 1 }],
    state: {
      step: 'running',
      pollInFlight: false,
      data: {
        active: [dl('a')], waiting: [dl('w', 'waiting')], stopped: [dl('s', 'complete')],
        stat: { downloadSpeed: '2048' }, limit: '0', samples: [{ t: T0 + 12_000, v: 2048 }],
      },
    },
  },
  {
    name: 'the first poll failed: said, and the ticks start all the same',
    given: H.pollFirstPoll,
    event: { type: 'pollFailed', generation: 1, error: broken('aria2.tellActive timed out') },
    effects: [
      { type: 'setConnection', text: 'Update failed (aria2.tellActive timed out)', kind: 'down' },
      { type: 'startTicks', generation: 1 },
    ],
    state: { step: 'running', pollInFlight: false },
  },
  {
    name: 'the first poll refused: signed out, no ticks',
    given: H.pollFirstPoll,
    event: { type: 'pollFailed', generation: 1, error: unauthorized },
    effects: [{ type: 'forgetSecret' }, ...signedOutEffects(WRONG_SECRET)],
    state: { mode: 'signin', pollInFlight: false, step: 'idle' },
  },
  {
    name: 'live while a poll of an older generation still runs: no second poll, the ticks start at once',
    given: [...H.poll, { type: 'tick', generation: 1 }, { type: 'hashToken', secret: 'new' },
      { type: 'socketOpened', generation: 2, open: false }],
    event: { type: 'checked', generation: 2 },
    effects: [
      { type: 'storeSecret', secret: 'new' },
      { type: 'showApp', signOut: true },
      { type: 'setConnection', text: 'Live (polling: this server does not push)', kind: 'poll' },
      { type: 'startTicks', generation: 2 },
    ],
    state: { step: 'running', pollInFlight: true },
  },
  {
    name: 'the older generation\'s poll answers: it ends its poll, shows nothing',
    given: [...H.poll, { type: 'tick', generation: 1 }, { type: 'hashToken', secret: 'new' }],
    event: { type: 'polled', generation: 1, stat: { downloadSpeed: '1' }, active: [], waiting: [], stopped: [] },
    effects: [],
    state: { pollInFlight: false, data: { active: [dl('a')], waiting: [], stopped: [], stat: { downloadSpeed: '7' },
      limit: '1048576', samples: [{ t: T0 + 10_500, v: 7 }] } },
  },
  // -------------------------------------------------------------------------------------------------- push
  {
    name: 'a push with a new queueVersion: shown, and the lists fetched',
    given: H.push,
    event: progress({
      globalStat: { downloadSpeed: '1048576' }, maxOverallDownloadLimit: '0', queueVersion: 17, active: [dl('b')],
    }, T0 + 11_000),
    effects: [
      { type: 'setConnection', text: 'Live', kind: 'live' },
      { type: 'fetchLists', generation: 1 },
      { type: 'render' },
    ],
    state: {
      lastPush: T0 + 11_000, queueVersion: '17', listsInFlight: true,
      data: {
        active: [dl('b')], waiting: [dl('w', 'waiting')], stopped: [], stat: { downloadSpeed: '1048576' }, limit: '0',
        samples: [{ t: T0 + 11_000, v: 1048576 }],
      },
    },
  },
  {
    name: 'a push with the same queueVersion: shown, no fetch',
    given: [...H.push, progress({ queueVersion: '4' }, T0 + 11_000), { type: 'listsFetched', generation: 1,
      waiting: [], stopped: [] }],
    event: progress({ queueVersion: '4', active: [] }, T0 + 12_000),
    effects: [{ type: 'setConnection', text: 'Live', kind: 'live' }, { type: 'render' }],
    state: { queueVersion: '4', listsInFlight: false },
  },
  {
    name: 'a push without queueVersion (another server): the lists every time',
    given: [...H.push, progress({}, T0 + 11_000), { type: 'listsFetched', generation: 1, waiting: [], stopped: [] }],
    event: progress({}, T0 + 12_000),
    effects: [
      { type: 'setConnection', text: 'Live', kind: 'live' },
      { type: 'fetchLists', generation: 1 },
      { type: 'render' },
    ],
    state: { queueVersion: null },
  },
  {
    name: 'a push while the lists are being fetched: once more afterwards, not twice at once',
    given: H.pushListsInFlight,
    event: progress({ queueVersion: '2' }, T0 + 12_000),
    effects: [{ type: 'setConnection', text: 'Live', kind: 'live' }, { type: 'render' }],
    state: { listsInFlight: true, listsAgain: true, queueVersion: '2' },
  },
  {
    name: 'the lists answered, asked again meanwhile: shown, and fetched once more',
    given: [...H.pushListsInFlight, progress({ queueVersion: '2' }, T0 + 12_000)],
    event: { type: 'listsFetched', generation: 1, waiting: [dl('w2', 'paused')], stopped: [dl('s2', 'error')] },
    effects: [{ type: 'render' }, { type: 'fetchLists', generation: 1 }],
    state: { listsInFlight: true, listsAgain: false },
  },
  {
    name: 'the lists answered: shown',
    given: H.pushListsInFlight,
    event: { type: 'listsFetched', generation: 1, waiting: [dl('w2', 'paused')], stopped: 'not a list' },
    effects: [{ type: 'render' }],
    state: {
      listsInFlight: false,
      data: { active: [], waiting: [dl('w2', 'paused')], stopped: [], stat: {}, limit: null,
        samples: [{ t: T0 + 11_000, v: 0 }] },
    },
  },
  {
    name: 'the lists failed: nothing said (the next push tries again)',
    given: H.pushListsInFlight,
    event: { type: 'listsFailed', generation: 1, error: broken('the connection to the daemon closed') },
    effects: [],
    state: { listsInFlight: false, mode: 'push' },
  },
  {
    name: 'the lists refused: signed out',
    given: H.pushListsInFlight,
    event: { type: 'listsFailed', generation: 1, error: unauthorized },
    effects: [{ type: 'forgetSecret' }, ...signedOutEffects(WRONG_SECRET)],
    state: { listsInFlight: false, mode: 'signin' },
  },
  {
    name: 'an aria2 notification with the push: the lists',
    given: H.push,
    event: { type: 'notification', generation: 1, method: 'aria2.onDownloadComplete', params: [{ gid: 'a' }] },
    effects: [{ type: 'fetchLists', generation: 1 }],
    state: { listsInFlight: true },
  },
  {
    name: 'an aria2 notification while polling: a poll',
    given: H.poll,
    event: { type: 'notification', generation: 1, method: 'aria2.onDownloadPause', params: [{ gid: 'a' }] },
    effects: [{ type: 'poll', generation: 1, withOption: true }], // no tick yet: 0 is a fifth tick
    state: { pollInFlight: true },
  },
  {
    name: 'a notification the page does not know: nothing',
    given: H.push,
    event: { type: 'notification', generation: 1, method: 'system.somethingNew', params: [] },
    effects: [],
    state: { listsInFlight: false },
  },
  {
    name: 'a tick with a fresh push: the graph only',
    given: H.push,
    event: { type: 'tick', generation: 1, now: T0 + 13_000 },
    effects: [{ type: 'drawGraph' }],
    state: { ticks: 1 },
  },
  {
    name: 'a tick 4 s after the last push: said, and a poll meanwhile',
    given: H.push,
    event: { type: 'tick', generation: 1, now: T0 + 10_000 + 4001 },
    effects: [
      { type: 'setConnection', text: 'Live (no update for a while…)', kind: 'poll' },
      { type: 'poll', generation: 1, withOption: false },
      { type: 'drawGraph' },
    ],
    state: { pollInFlight: true, mode: 'push' },
  },
  {
    name: 'a tick 15 s after the last push: a new socket and subscription',
    given: H.push,
    event: { type: 'tick', generation: 1, now: T0 + 10_000 + 15_001 },
    effects: [
      { type: 'setConnection', text: 'No update for a while, reconnecting…', kind: 'down' },
      { type: 'stopTimers' },
      { type: 'openClient', generation: 2, secret: 's', timeoutMs: 4000 },
    ],
    state: { generation: 2, mode: 'push', step: 'opening' },
  },
  {
    name: 'the lists fetched after an action leave the push\'s active list alone (it has the ranges)',
    given: [...H.push, progress({ active: [dl('b', 'active', { ranges: [[0, 5]] })], queueVersion: '1' }, T0 + 14_000),
      { type: 'listsFetched', generation: 1, waiting: [], stopped: [] }, { type: 'refreshLists' }],
    event: { type: 'listsFetched', generation: 1, waiting: [dl('w', 'waiting')], stopped: [dl('s', 'complete')] },
    effects: [{ type: 'render' }],
    state: { data: { active: [dl('b', 'active', { ranges: [[0, 5]] })], waiting: [dl('w', 'waiting')],
      stopped: [dl('s', 'complete')], stat: {}, limit: null, samples: [{ t: T0 + 14_000, v: 0 }] } },
  },
  {
    name: 'a poll answered once the push is fresh again: the push\'s active list stays, no sample from the poll',
    given: [...H.push,
      progress({ active: [dl('b')], queueVersion: '1', globalStat: { downloadSpeed: '9' } }, T0 + 14_000),
      { type: 'listsFetched', generation: 1, waiting: [], stopped: [] },
      { type: 'tick', generation: 1, now: T0 + 18_500 } /* stale: polls */,
      progress({ active: [dl('c')], queueVersion: '1', globalStat: { downloadSpeed: '3' } }, T0 + 18_600)],
    event: { type: 'polled', generation: 1, stat: { downloadSpeed: '1' }, active: [dl('old')], waiting: [],
      stopped: [dl('s', 'complete')], now: T0 + 18_700 },
    effects: [{ type: 'render' }],
    state: { data: { active: [dl('c')], waiting: [], stopped: [dl('s', 'complete')], stat: { downloadSpeed: '1' },
      limit: null,
      samples: [{ t: T0 + 14_000, v: 9 }, { t: T0 + 18_600, v: 3 }] } },
  },
  {
    name: 'a poll answered while the push is stale: the active list and a sample from the poll',
    given: [...H.push, { type: 'tick', generation: 1, now: T0 + 15_000 }],
    event: { type: 'polled', generation: 1, stat: { downloadSpeed: '4' }, active: [dl('p')], waiting: [], stopped: [],
      now: T0 + 15_100 },
    effects: [{ type: 'render' }],
    state: { data: { active: [dl('p')], waiting: [], stopped: [], stat: { downloadSpeed: '4' }, limit: null,
      samples: [{ t: T0 + 15_100, v: 4 }] } },
  },
  {
    name: 'a fleet\'s push lists its nodes; a push without them (a single daemon) leaves none',
    given: [...H.push, progress({ queueVersion: '1', nodes: [{ name: 'a' }] }, T0 + 14_000)],
    event: progress({ queueVersion: '1' }, T0 + 14_500),
    effects: [{ type: 'setConnection', text: 'Live', kind: 'live' }, { type: 'render' }],
    state: { data: { ...pushData, stat: {}, samples: [{ t: T0 + 14_000, v: 0 }, { t: T0 + 14_500, v: 0 }] } },
  },
  {
    name: 'a fleet\'s push: its nodes in the data',
    given: [...H.push, progress({ queueVersion: '1' }, T0 + 13_000)],
    event: progress({ queueVersion: '1', nodes: [{ name: 'a' }, { name: 'b' }] }, T0 + 14_000),
    effects: [{ type: 'setConnection', text: 'Live', kind: 'live' }, { type: 'render' }],
    state: { data: { ...pushData, stat: {}, samples: [{ t: T0 + 13_000, v: 0 }, { t: T0 + 14_000, v: 0 }],
      nodes: [{ name: 'a' }, { name: 'b' }] } },
  },
  // -------------------------------------------------------------------------------------------------- poll
  {
    name: 'polling, a tick: a poll without the limit (known)',
    given: H.poll,
    event: { type: 'tick', generation: 1 },
    effects: [{ type: 'poll', generation: 1, withOption: false }, { type: 'drawGraph' }],
    state: { ticks: 1, pollInFlight: true },
  },
  {
    name: 'polling, a tick while the last poll still runs: the graph only',
    given: [...H.poll, { type: 'tick', generation: 1 }],
    event: { type: 'tick', generation: 1 },
    effects: [{ type: 'drawGraph' }],
    state: { ticks: 2, pollInFlight: true },
  },
  {
    name: 'polling, every fifth tick asks for the limit',
    given: [...H.poll, ...[1, 2, 3, 4].flatMap(() => [{ type: 'tick', generation: 1 },
      { type: 'polled', generation: 1, stat: {}, active: [], waiting: [], stopped: [] }])],
    event: { type: 'tick', generation: 1 },
    effects: [{ type: 'poll', generation: 1, withOption: true }, { type: 'drawGraph' }],
    state: { ticks: 5 },
  },
  {
    name: 'polling, a failed poll is said; the ticks go on',
    given: [...H.poll, { type: 'tick', generation: 1 }],
    event: { type: 'pollFailed', generation: 1, error: broken('Failed to fetch') },
    effects: [{ type: 'setConnection', text: 'Update failed (Failed to fetch)', kind: 'down' }],
    state: { pollInFlight: false, step: 'running' },
  },
  // --------------------------------------------------------------------------------------- losing the socket
  {
    name: 'the socket closed: said, a new generation, and a reconnect in 2 s',
    given: H.push,
    event: { type: 'closed', generation: 1 },
    effects: [
      { type: 'stopTimers' },
      { type: 'setConnection', text: 'Connection lost, reconnecting…', kind: 'down' },
      { type: 'reconnectAfter', generation: 2, ms: 2000 },
    ],
    state: { generation: 2, step: 'waiting', mode: 'push' },
  },
  {
    name: 'the reconnect: no "Connecting…" over what the page says (it was live)',
    given: [...H.push, { type: 'closed', generation: 1 }],
    event: { type: 'reconnectDue', generation: 2 },
    effects: [{ type: 'stopTimers' }, { type: 'openClient', generation: 3, secret: 's', timeoutMs: 4000 }],
    state: { generation: 3, step: 'opening' },
  },
  {
    name: 'an older generation\'s socket, timer or answer: dropped',
    given: [...H.push, { type: 'closed', generation: 1 }],
    event: { type: 'tick', generation: 1 },
    effects: [],
    state: { generation: 2, ticks: 0 },
  },
  {
    name: 'an older generation\'s reconnect: dropped',
    given: [...H.push, { type: 'closed', generation: 1 }, { type: 'reconnectDue', generation: 2 }],
    event: { type: 'reconnectDue', generation: 2 },
    effects: [],
    state: { generation: 3 },
  },
  {
    name: 'an older generation\'s push: dropped',
    given: [...H.push, { type: 'closed', generation: 1 }],
    event: progress({ active: [dl('z')] }),
    effects: [],
    state: { data: pushData },
  },
  {
    name: 'an older generation\'s refusal: dropped',
    given: [...H.push, { type: 'closed', generation: 1 }],
    event: { type: 'checkFailed', generation: 1, error: unauthorized },
    effects: [],
    state: { mode: 'push', secret: 's' },
  },
  // ------------------------------------------------------------------------------------- signing in and out
  {
    name: 'sign out: the secret forgotten, the downloads gone, the form',
    given: H.push,
    event: { type: 'signOut' },
    effects: [{ type: 'forgetSecret' }, ...signedOutEffects('')],
    state: { mode: 'signin', secret: null, secretStored: false, queueVersion: null, client: false,
      data: { active: [], waiting: [], stopped: [], stat: {}, limit: null, samples: [] } },
  },
  {
    name: 'sign in from the form: checked like any secret',
    given: H.signedOut,
    event: { type: 'signIn', secret: 'typed' },
    effects: [
      { type: 'setConnection', text: 'Checking the secret…', kind: '' },
      { type: 'stopTimers' },
      { type: 'setConnection', text: 'Connecting…', kind: '' },
      { type: 'openClient', generation: 3, secret: 'typed', timeoutMs: 4000 },
    ],
    state: { mode: 'connecting', secret: 'typed', secretStored: false, client: true },
  },
  {
    name: '#token= typed into the address of the open page: a new connection with it, not stored yet',
    given: H.push,
    event: { type: 'hashToken', secret: 'other' },
    effects: [
      { type: 'stopTimers' },
      { type: 'setConnection', text: 'Connecting…', kind: '' },
      { type: 'openClient', generation: 2, secret: 'other', timeoutMs: 4000 },
    ],
    state: { mode: 'connecting', secret: 'other', secretStored: false },
  },
  {
    name: 'an action refused: signed out like any refusal',
    given: H.poll,
    event: { type: 'refused' },
    effects: [{ type: 'forgetSecret' }, ...signedOutEffects(WRONG_SECRET)],
    state: { mode: 'signin' },
  },
  // ------------------------------------------------------------------------------------------------ actions
  {
    name: 'after an action, with the push: the lists',
    given: H.push,
    event: { type: 'refreshLists' },
    effects: [{ type: 'fetchLists', generation: 1 }],
    state: { listsInFlight: true },
  },
  {
    name: 'after an action, polling: a poll',
    given: H.poll,
    event: { type: 'refreshLists' },
    effects: [{ type: 'poll', generation: 1, withOption: true }],
    state: { pollInFlight: true },
  },
  {
    name: 'after an action, signed out: nothing',
    given: H.signedOut,
    event: { type: 'refreshLists' },
    effects: [],
    state: { listsInFlight: false },
  },
  {
    name: 'a new speed limit: shown at once',
    given: H.push,
    event: { type: 'limitSet', limit: '2097152' },
    effects: [{ type: 'render' }, { type: 'drawGraph' }],
    state: { data: { ...pushData, limit: '2097152' } },
  },
];

// The fields a row names, each compared whole (`data` too); the others are not that row's concern.
function expectFields(actual, expected) {
  for (const [key, value] of Object.entries(expected)) assert.deepEqual(actual[key], value, `state.${key}`);
}

for (const row of rows) {
  test(row.name, () => {
    const before = run(row.given).state;
    const { state, effects } = run([row.event], before);
    assert.deepEqual(effects, row.effects, 'effects');
    expectFields(state, row.state);
  });
}

test('a whole session by push: the effects in order', () => {
  const events = [
    { type: 'start', secret: 's', secretStored: true },
    { type: 'socketOpened', generation: 1, open: true },
    { type: 'checked', generation: 1 },
    { type: 'subscribed', generation: 1 },
    { type: 'polled', generation: 1, stat: {}, active: [], waiting: [], stopped: [] },
    progress({ queueVersion: '1' }),
    { type: 'listsFetched', generation: 1, waiting: [], stopped: [] },
    { type: 'signOut' },
  ];
  let state = initialState();
  const types = [];
  for (const [i, event] of events.entries()) {
    const result = next(freeze(state), { now: T0 + 10_000 + i, ...event });
    state = result.state;
    types.push(result.effects.map((e) => e.type).join(' '));
  }
  assert.deepEqual(types, [
    'stopTimers setConnection openClient',
    'check',
    'subscribe',
    'showApp setConnection poll',
    'render startTicks',
    'setConnection fetchLists render',
    'render',
    'forgetSecret stopTimers closeClient clearRows showSignIn setConnection',
  ]);
});

test('an event the machine does not know is a mistake, not a no-op', () => {
  assert.throws(() => next(initialState(), { type: 'nonsense', now: T0 }), /no such event nonsense/);
});

test('addSample keeps five minutes (and 2 s) of samples', () => {
  const now = T0 + HISTORY_MS + 10_000;
  const samples = [
    { t: now - HISTORY_MS - 2001, v: 1 },
    { t: now - HISTORY_MS - 2000, v: 2 },
    { t: now - 1000, v: 3 },
  ];
  assert.deepEqual(addSample(freeze(samples), 4, now), [
    { t: now - HISTORY_MS - 2000, v: 2 },
    { t: now - 1000, v: 3 },
    { t: now, v: 4 },
  ]);
});

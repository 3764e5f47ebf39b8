// A row's buttons as RPC calls. `call(method, params)` is the client's; `sleep(ms)` waits. No DOM: the tests
// give both and read the calls made.

import { isUnauthorized } from './rpc.js';

/**
 * Runs `action` (a button's name) on the download `s` (its last status; `{gid, status}` at least); `waiting` is
 * the queue as shown, for Move up and Move down. Throws what the daemon answered.
 */
export async function runAction(action, s, waiting, { call, sleep }) {
  const gid = s.gid;
  const status = s.status;
  switch (action) {
    case 'Pause':
      await call('aria2.forcePause', [gid]);
      break;
    case 'Resume':
      await call('aria2.unpause', [gid]);
      break;
    case 'Remove':
      if (status === 'complete' || status === 'error' || status === 'removed') {
        await call('aria2.removeDownloadResult', [gid]);
      } else {
        await call('aria2.forceRemove', [gid]);
        // aria2 keeps a result ("removed") only for an active one; a queued one is simply gone.
        await dropResultWhenStopped(gid, status === 'active' ? 20 : 2, { call, sleep });
      }
      break;
    case 'Retry': {
      const options = (await call('aria2.getOption', [gid])) || {};
      const file = (s.files && s.files[0]) || {};
      const uris = [...new Set((file.uris || []).map((u) => u.uri).filter(Boolean))];
      if (!uris.length) throw new Error('this download has no URL left to retry');
      await call('aria2.addUri', [uris, options]);
      await call('aria2.removeDownloadResult', [gid]).catch(() => {});
      break;
    }
    case 'Move up':
    case 'Move down': {
      const index = waiting.findIndex((x) => x.gid === gid);
      if (index < 0) return;
      const to = action === 'Move up' ? Math.max(0, index - 1) : index + 1;
      await call('aria2.changePosition', [gid, to, 'POS_SET']);
      break;
    }
    default:
      return;
  }
}

export const DROP_RETRY_MS = 250;

// A removed active download stops after a moment; its result is then dropped too, so it leaves the page.
async function dropResultWhenStopped(gid, tries, { call, sleep }) {
  for (let i = 0; i < tries; i++) {
    try {
      await call('aria2.removeDownloadResult', [gid]);
      return;
    } catch (e) {
      if (isUnauthorized(e)) throw e;
    }
    await sleep(DROP_RETRY_MS);
  }
}

// The dashboard's files as the daemon serves them: every file in the folder is compiled into the binary
// (Package.swift) and served at its path (DashboardAssets.swift); every module a module imports is one of them;
// the modules the tests import touch no browser global when they load.
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { test } from 'node:test';

const root = new URL('../../', import.meta.url);
const read = (path) => readFileSync(new URL(path, root), 'utf8');
const DASHBOARD = 'Sources/DownpourRPC/Resources/dashboard/';
const files = readdirSync(new URL(DASHBOARD, root)).sort();
const scripts = files.filter((f) => f.endsWith('.js'));

// SwiftPM's name for an embedded file: its name with `.` and `-` as `_`.
const resourceName = (file) => file.replace(/[.-]/g, '_');

test('the folder holds the page, the style sheet and the modules', () => {
  for (const f of ['index.html', 'style.css', 'app.js']) assert.ok(files.includes(f), f);
  const others = files.filter((f) => !/\.(html|css|js)$/.test(f));
  assert.deepEqual(others, [], 'a file SwiftPM would not know what to do with');
});

test('Package.swift embeds every file of the folder, and nothing else from it', () => {
  const manifest = read('Package.swift');
  const embedded = [...manifest.matchAll(/\.embedInCode\("Resources\/dashboard\/([^"]+)"\)/g)].map((m) => m[1]).sort();
  assert.deepEqual(embedded, files);
});

test('DashboardAssets serves every script and the style sheet under /dashboard/, by its PackageResources name', () => {
  const swift = read('Sources/DownpourRPC/Server/DashboardAssets.swift');
  const served = new Map(
    [...swift.matchAll(/"(\/[^"]*)":\s*Asset\(\s*bytes:\s*PackageResources\.(\w+),\s*contentType:\s*([^)]+)\)/g)]
      .map((m) => [m[1], { resource: m[2], type: m[3].trim() }]),
  );
  for (const f of files.filter((x) => x !== 'index.html')) {
    const asset = served.get(`/dashboard/${f}`);
    assert.ok(asset, `/dashboard/${f} is not served`);
    assert.equal(asset.resource, resourceName(f), f);
  }
  assert.equal(served.get('/').resource, 'index_html');
  const paths = [...served.keys()].filter((p) => p.startsWith('/dashboard/')).map((p) => p.slice('/dashboard/'.length));
  assert.deepEqual(paths.sort(), files.filter((x) => x !== 'index.html'), 'a path served for a file that is not there');
});

test('index.html loads app.js as a module, and the style sheet', () => {
  const html = read(`${DASHBOARD}index.html`);
  assert.match(html, /<script type="module" src="dashboard\/app\.js"><\/script>/);
  assert.match(html, /<link rel="stylesheet" href="dashboard\/style\.css">/);
  assert.equal((html.match(/<script/g) || []).length, 1, 'one script: the modules import the rest');
});

test('every import names a module of the folder, relative to it', () => {
  const reached = new Set(['app.js']);
  for (const f of scripts) {
    const source = read(`${DASHBOARD}${f}`);
    for (const m of source.matchAll(/^\s*import\s[^;]*?from\s+'([^']+)';/gm)) {
      const spec = m[1];
      assert.match(spec, /^\.\/[\w-]+\.js$/, `${f} imports ${spec}`);
      assert.ok(scripts.includes(spec.slice(2)), `${f} imports ${spec}, which is not in the folder`);
      reached.add(spec.slice(2));
    }
  }
  assert.deepEqual([...reached].sort(), scripts, 'a module nothing imports');
});

test('the pure modules name no browser global', () => {
  for (const f of ['format.js', 'rpc.js', 'connection.js', 'view.js', 'forms.js', 'actions.js']) {
    const code = read(`${DASHBOARD}${f}`).replace(/\/\/.*$/gm, '').replace(/\/\*[\s\S]*?\*\//g, '');
    const found = code.match(/\b(document|window|localStorage|location|history)\b/g);
    assert.equal(found, null, `${f} uses ${found}`);
  }
});

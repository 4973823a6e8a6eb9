// What the browser tests share: test users, waiting for a page's data, the API as a script uses it
// (bearer token) for the parts of a scenario that are not the page under test, sign-up and the
// billing country through the account page.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { before, after } from 'node:test';
import { startServer } from './server.mjs';
import { launch } from './browser.mjs';

export const PASSWORD = 'correct horse battery staple';

export function username(prefix) {
  return prefix + '_' + randomBytes(3).toString('hex');
}

// No visible loading placeholder left (hidden sections may keep theirs).
export async function waitForData(page) {
  await page.waitForFunction(() => ![...document.querySelectorAll('.loading')].some((el) => el.offsetParent !== null), null, {
    timeout: 30000,
  });
}

// A session token of `name` (made with api.user or signed up in a page) for the API client.
export async function tokenOf(api, name) {
  return (await api.call('POST', '/v1/sessions', { username: name, password: PASSWORD })).token;
}

// Every link of the header's navigation is inside the screen and not cut (issue 29: the phone's
// header was cut at "Acc…").
export async function headerLinksVisible(page) {
  const cut = await page.evaluate(() => {
    const out = [];
    for (const a of document.querySelectorAll('.site-header .nav a:not([hidden])')) {
      const r = a.getBoundingClientRect();
      if (a.offsetParent === null || r.left < 0 || r.right > window.innerWidth + 0.5 || a.scrollWidth > a.clientWidth + 1) out.push(a.textContent);
    }
    return out;
  });
  assert.deepEqual(cut, [], 'header links cut or off screen');
}

// The JSON bodies of the page's POST requests to `path`, in order, as the page sends them (those
// `keep` accepts).
export function recordBodies(page, path, keep = () => true) {
  const bodies = [];
  page.on('request', (r) => {
    if (r.method() !== 'POST' || new URL(r.url()).pathname !== path) return;
    const body = JSON.parse(r.postData());
    if (keep(body)) bodies.push(body);
  });
  return bodies;
}

// Problems other than the ones a test provokes on purpose.
export function unexpected(problems, allowed = []) {
  return problems.filter((p) => !allowed.some((a) => p.includes(a)));
}

// The API of `server` (lib/server.mjs) with a bearer token: call(), user() (sign up and log in, the
// token back) and fund() (a top-up settled by the signed webhook).
export function apiClient(server) {
  async function call(method, path, body, token) {
    const headers = { 'Content-Type': 'application/json' };
    if (token) headers.Authorization = 'Bearer ' + token;
    const res = await fetch(server.url + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await res.text();
    const data = text ? JSON.parse(text) : null;
    if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
    return data;
  }
  // A signed-in user with the billing country a purchase needs (US: no tax, net = gross).
  async function user(name, roles) {
    await call('POST', '/v1/accounts', { username: name, password: PASSWORD, roles });
    const token = (await call('POST', '/v1/sessions', { username: name, password: PASSWORD })).token;
    await call('PUT', '/v1/billing-profile', { billing_country: 'US' }, token);
    return token;
  }
  async function fund(token, amount) {
    const inv = await call('POST', '/v1/topups', { amount, currency: 'USD' }, token);
    const settled = await server.settleInvoice(inv.invoice_id);
    assert.equal(settled.status, 200);
  }
  return { call, user, fund };
}

// Signs up through the account page; leaves the page signed in.
export async function signUp(page, name) {
  await page.goto('/account/');
  await page.waitForSelector('#signup-form');
  await page.fill('#signup-username', name);
  await page.fill('#signup-password', PASSWORD);
  await page.click('#signup-form button[type="submit"]');
  await page.waitForSelector('#signed-in:not([hidden])');
  await waitForData(page);
}

// Opens a tab of the account page (Overview, Storage, Billing and invoices, SSH keys, Top-ups and
// history, Notifications, API keys) by its link, as a person would: `hash` is its fragment
// ('ssh-keys', 'billing', 'history', 'notifications-section', 'api-keys', 'storage-section').
export async function accountTab(page, hash) {
  await page.click(`.account-tabs a[href="#${hash}"]`);
  await page.waitForSelector(`.account-tabs a[href="#${hash}"][aria-current="page"]`);
}

// Sets the billing country on the account page's billing form (a purchase needs one) and waits
// for it to be saved.
export async function setBillingCountry(page, code) {
  if (!page.url().includes('/account/')) await page.goto('/account/#billing');
  else await accountTab(page, 'billing');
  await page.waitForSelector('#billing-form');
  await page.waitForFunction(() => document.querySelectorAll('#billing-country option').length > 1);
  await page.selectOption('#billing-country', code);
  await page.click('#billing-form button[type="submit"]');
  await page.waitForSelector('#billing-status[data-state="complete"]');
  // Back to the overview (wallets, top-up, rentals), where the page opens after signing in.
  await accountTab(page, 'overview');
}

// One real server (port 0, fresh database) and one Chromium per test file, started before its
// tests and stopped after them: env.server, env.chrome and env.api (apiClient of that server).
export function useServerAndBrowser() {
  const env = {};
  before(async () => {
    env.server = await startServer();
    env.chrome = await launch();
    env.api = apiClient(env.server);
  });
  after(async () => {
    await env.chrome?.close();
    await env.server?.stop();
  });
  return env;
}

// Signs in on the account page as `name` (a user made with api.user) and waits for its data.
export async function logIn(page, name) {
  await page.goto('/account/');
  await page.waitForSelector('#login-form');
  await page.fill('#login-username', name);
  await page.fill('#login-password', PASSWORD);
  await page.click('#login-form button[type="submit"]');
  await page.waitForSelector('#signed-in:not([hidden])');
  await waitForData(page);
}

// A host agent scripted over its HTTP API (what `gpuhub agent` sends): beat(n, workloads) reports
// n H100s (uuids `${uuidPrefix}-i`), the CPUs, RAM and disk it measures, and its workloads' states.
export function scriptedAgent(api, credential, { hostname = 'gpu-e2e', publicHost = '198.51.100.7', uuidPrefix = 'GPU-e2e' } = {}) {
  const gpus = (n) => Array.from({ length: n }, (_, i) => ({ index: i, uuid: `${uuidPrefix}-${i}`, name: 'NVIDIA H100 80GB HBM3', memory_mib: 81559, healthy: true, health: [] }));
  return {
    beat: (n, workloads = []) =>
      api.call('POST', '/v1/agent/heartbeat', { hostname, public_host: publicHost, agent_version: '0.1.0', inventory: { source: 'nvidia-smi', vcpus: 64, ram_mib: 524288, disk_total_gb: 7680, nvme_free_gb: 7000, gpus: gpus(n) }, workloads }, credential),
  };
}

// Issue 29, stock and price alerts instead of dead ends, in a real browser against a real server
// (fresh database, demo fleet and exchange, manual clock), at 1440×900 and 390×844:
//  - a catalog card with none free ("On request") has "Notify me when free": signed out it leads
//    to the log-in; signed in it makes a stock alert (count and region chosen), which fires when
//    the administrator adds a node of that card in that region: the notification and the alert
//    ("fired 1 time") are on the account's Notifications and alerts tab;
//  - the rent page's "not available" offers the alert with its count and region filled in, the
//    card's spot hours where it trades, and the cards free now;
//  - a market nobody offers in (every GPU leased) says so and offers "Notify me when offered";
//    an offer at or under the price fires it, once;
//  - the account tab makes alerts from its own form, lists them (holds now / waiting) and cancels;
//  - axe-core finds no serious or critical violation on each; nothing is wider than the screen.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { newPage, screenshot } from './lib/browser.mjs';
import { username, waitForData, unexpected, signUp, useServerAndBrowser, accountTab, headerLinksVisible, tokenOf as tokenOfUser } from './lib/helpers.mjs';
import { noSeriousViolations } from './lib/axe.mjs';

const env = useServerAndBrowser();
const DESKTOP = { width: 1440, height: 900 };
const PHONE = { width: 390, height: 844 };

const tokenOf = (name) => tokenOfUser(env.api, name);

async function fitsTheScreen(page) {
  assert.equal(await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth), 0, 'nothing wider than the screen');
}

async function notifications(token) {
  return (await env.api.call('GET', '/v1/notifications?limit=50', undefined, token)).notifications;
}

test('a card with none free: Notify me when free, fired when a node of it arrives', async () => {
  const { context, page, problems } = await newPage(env.chrome.browser, 'desktop', env.server.url);
  try {
    await page.setViewportSize(DESKTOP);
    // Signed out: the control leads to the log-in, which comes back here.
    await page.goto('/');
    await page.waitForSelector('.gpu-card[data-gpu="A40"] [data-testid="on-request"]');
    await waitForData(page);
    const a40 = page.locator('.gpu-card[data-gpu="A40"]');
    await a40.locator('[data-testid="notify-me"] button').click();
    const login = a40.locator('[data-testid="notify-me"] a[href^="/account/?next="]');
    await login.waitFor();
    assert.match(await a40.locator('[data-testid="notify-me"]').innerText(), /Log in to be told when 1 A40 can be rented\./);
    await noSeriousViolations(page, 'catalog with a Notify me open (signed out)');

    const name = username('nora');
    await signUp(page, name);
    await page.goto('/');
    await page.waitForSelector('.gpu-card[data-gpu="A40"] [data-testid="notify-me"]');
    await waitForData(page);
    await a40.locator('[data-testid="notify-me"] button').click();
    const form = a40.locator('form.notify-form');
    await form.waitFor();
    assert.deepEqual(await form.locator('select[name="count"] option').allInnerTexts(), ['1', '2', '4', '8'], "the card's counts");
    assert.deepEqual(await form.locator('select[name="region"] option').allInnerTexts(), ['Any region', 'DFW-1', 'IAD-1', 'PDX-1']);
    await form.locator('select[name="count"]').selectOption('2');
    await form.locator('select[name="region"]').selectOption('DFW-1');
    await noSeriousViolations(page, 'catalog with the alert form open');
    await screenshot(page, 'alerts-catalog-notify-desktop');
    await form.locator('button[type="submit"]').click();
    const done = a40.locator('.notify-done');
    await done.waitFor();
    assert.match(await done.innerText(), /^Done: we will notify you when 2 × A40 free in DFW-1, once each time it becomes true\. Your alerts$/);
    assert.equal(await done.locator('a').getAttribute('href'), '/account/#notifications-section');

    const token = await tokenOf(name);
    const [alert] = (await env.api.call('GET', '/v1/alerts', undefined, token)).alerts;
    assert.deepEqual([alert.kind, alert.gpu, alert.count, alert.region, alert.holds_now, alert.fired_count], ['stock', 'A40', 2, 'DFW-1', false, 0]);

    // A node of A40 in another region: nothing; in DFW-1: the alert fires.
    const admin = await env.server.adminToken();
    await env.api.call('POST', '/v1/admin/nodes', { gpu: 'A40', region: 'IAD-1' }, admin);
    assert.equal((await env.api.call('GET', '/v1/alerts', undefined, token)).alerts[0].fired_count, 0);
    await env.api.call('POST', '/v1/admin/nodes', { gpu: 'A40', region: 'DFW-1' }, admin);
    const notes = (await notifications(token)).filter((n) => n.type === 'alert.stock');
    assert.equal(notes.length, 1);
    assert.match(notes[0].message, /^2 × A40 can be rented now in DFW-1 \(\d+ sets? free; alert \d+\)$/);

    // The account's tab: the notification and the alert, fired once.
    await page.goto('/account/#notifications-section');
    await page.waitForSelector('#signed-in:not([hidden])');
    await waitForData(page);
    assert.equal(await page.getAttribute('.account-tabs a[aria-current="page"]', 'href'), '#notifications-section');
    assert.match(await page.locator('#notifications').innerText(), /2 × A40 can be rented now in DFW-1/);
    const item = page.locator(`#alerts li[data-alert="${alert.id}"]`);
    assert.match(await item.innerText(), /2 × A40 free in DFW-1\s+holds now fired 1 time, last /);
    assert.equal(await page.locator('#alerts-count').innerText(), '1 of at most 25');
    await noSeriousViolations(page, 'account, notifications and alerts');
    await screenshot(page, 'alerts-account-desktop');
    await page.setViewportSize(PHONE);
    await headerLinksVisible(page);
    await fitsTheScreen(page);
    await screenshot(page, 'alerts-account-phone');
    assert.deepEqual(unexpected(problems), []);
  } finally {
    await context.close();
  }
});

test('the rent page without stock: Notify me with its count and region, spot hours, free cards', async () => {
  const { context, page, problems } = await newPage(env.chrome.browser, 'phone', env.server.url);
  try {
    await page.setViewportSize(PHONE);
    const name = username('ron');
    await signUp(page, name);
    await page.goto('/rent/?gpu=B200&count=4&term=week&region=IAD-1');
    await page.waitForSelector('[data-testid="quote-unavailable"]');
    await waitForData(page);
    assert.equal(await page.locator('#rent-submit').innerText(), 'Not available');
    const steps = page.locator('.next-steps');
    assert.equal(await steps.locator('a', { hasText: 'Buy spot hours instead' }).getAttribute('href'), '/market/?gpu=B200&count=4&region=IAD-1');
    assert.equal(await steps.locator('a', { hasText: 'Cards free now' }).getAttribute('href'), '/?stock=1');
    await steps.locator('[data-testid="notify-me"] button', { hasText: 'Notify me when 4 are free' }).click();
    const form = steps.locator('form.notify-form');
    await form.waitFor();
    assert.equal(await form.locator('select[name="count"]').inputValue(), '4');
    assert.equal(await form.locator('select[name="region"]').inputValue(), 'IAD-1');
    await fitsTheScreen(page);
    await noSeriousViolations(page, 'rent page without stock, the alert form open');
    await screenshot(page, 'alerts-rent-phone');
    await form.locator('button[type="submit"]').click();
    await steps.locator('.notify-done').waitFor();
    const alerts = (await env.api.call('GET', '/v1/alerts', undefined, await tokenOf(name))).alerts;
    assert.deepEqual(alerts.map((a) => a.description), ['4 × B200 free in IAD-1']);
    assert.deepEqual(unexpected(problems), []);
  } finally {
    await context.close();
  }
});

test('a market nobody offers in: Notify me when offered, fired once by an offer under the price', async () => {
  // Every H100 NVL GPU of the demo (one machine of 8) leased, in two leases.
  const buyer = await env.api.user(username('bea'), ['customer']);
  await env.api.fund(buyer, '500.00');
  const leases = [];
  for (const gpus of [4, 4]) {
    const bid = await env.api.call('POST', '/v1/bids', { gpu: 'H100 NVL', gpus, market: true, time_in_force: 'ioc' }, buyer);
    assert.equal(bid.status, 'filled', JSON.stringify(bid));
    leases.push(bid.lease_id);
  }
  const market = (await env.api.call('GET', '/v1/markets')).markets.find((m) => m.gpu === 'H100 NVL');
  assert.equal(market.best_ask_usd_per_gpu_hour, null);

  const watchers = [];
  for (const size of ['phone', 'desktop']) {
    const { context, page, problems } = await newPage(env.chrome.browser, size, env.server.url);
    try {
      await page.setViewportSize(size === 'phone' ? PHONE : DESKTOP);
      const name = username('wes_' + size);
      watchers.push(name);
      await signUp(page, name);
      await page.goto('/market/?gpu=H100%20NVL');
      await page.waitForSelector('[data-testid="no-offers"]');
      await waitForData(page);
      assert.equal(await page.locator('[data-testid="no-offers"]').innerText(), 'Nobody offers H100 NVL GPU-hours right now.');
      await page.locator('#market-alert [data-testid="notify-me"] button', { hasText: 'Notify me when offered' }).click();
      const form = page.locator('#market-alert form.notify-form');
      await form.waitFor();
      // A refused price is a sentence beside the field.
      await form.locator('input[name="max_usd_per_gpu_hour"]').fill('3.1234');
      await form.locator('button[type="submit"]').click();
      const err = form.locator('[data-error-for="max_usd_per_gpu_hour"]');
      await page.waitForFunction((el) => el.textContent.length > 0, await err.elementHandle());
      assert.match(await err.innerText(), /^At or under \(\$ per GPU-hour\) .*3 decimals|^At or under/);
      await form.locator('input[name="max_usd_per_gpu_hour"]').fill('3.500');
      await fitsTheScreen(page);
      await noSeriousViolations(page, `market without offers, the alert form open (${size})`);
      await screenshot(page, `alerts-market-${size}`);
      await form.locator('button[type="submit"]').click();
      await page.locator('#market-alert .notify-done').waitFor();
      assert.match(await page.locator('#market-alert .notify-done').innerText(), /we will notify you when spot H100 NVL at or under \$3\.500\/h/);
      assert.deepEqual(unexpected(problems, ['/v1/alerts', 'status of 400']), []);
    } finally {
      await context.close();
    }
  }
  // One lease stopped: its 4 GPUs are on offer again at the demo's $3.190, under $3.500: each
  // watcher's alert fires, once; the second lease stopped (the same best offer) fires nothing more.
  await env.api.call('POST', `/v1/leases/${leases[0]}/stop`, {}, buyer);
  const again = (await env.api.call('GET', '/v1/markets')).markets.find((m) => m.gpu === 'H100 NVL');
  assert.equal(again.best_ask_usd_per_gpu_hour, '3.190');
  await env.api.call('POST', `/v1/leases/${leases[1]}/stop`, {}, buyer);
  for (const name of watchers) {
    const token = await tokenOf(name);
    const fired = (await notifications(token)).filter((n) => n.type === 'alert.price');
    assert.equal(fired.length, 1, name);
    assert.match(fired[0].message, /^Spot H100 NVL is offered at \$3\.190 per GPU-hour, at or under your \$3\.500 \(alert \d+\)$/);
    const [alert] = (await env.api.call('GET', '/v1/alerts', undefined, token)).alerts;
    assert.deepEqual([alert.holds_now, alert.fired_count], [true, 1]);
  }
});

test('the account tab: alerts made from its form, listed and cancelled', async () => {
  const { context, page, problems } = await newPage(env.chrome.browser, 'desktop', env.server.url);
  try {
    await page.setViewportSize(DESKTOP);
    const name = username('ada');
    await signUp(page, name);
    await accountTab(page, 'notifications-section');
    await page.waitForSelector('#new-alert select[name="kind"]');
    assert.match(await page.locator('#alerts').innerText(), /No alerts\./);
    // A stock alert on a card with many free: it holds at once (and says so).
    await page.selectOption('#new-alert-kind', 'stock');
    await page.selectOption('#new-alert-gpu', 'RTX 3090');
    await page.click('#new-alert form.notify-form button[type="submit"]');
    await page.waitForSelector('#alerts li[data-kind="stock"]');
    assert.match(await page.locator('#alerts li[data-kind="stock"]').innerText(), /1 RTX 3090 free in any region\s+holds now fired 1 time/);
    // A price alert under the book: waiting.
    await page.selectOption('#new-alert-kind', 'price');
    await page.selectOption('#new-alert-gpu', 'A100 SXM');
    await page.fill('#new-alert input[name="max_usd_per_gpu_hour"]', '1.000');
    await page.click('#new-alert form.notify-form button[type="submit"]');
    await page.waitForSelector('#alerts li[data-kind="price"]');
    assert.match(await page.locator('#alerts li[data-kind="price"]').innerText(), /Spot A100 SXM at or under \$1\.000\/h\s+waiting not fired yet/);
    assert.equal(await page.locator('#alerts li').count(), 2);
    assert.equal(await page.locator('#alerts-count').innerText(), '2 of at most 25');
    await noSeriousViolations(page, 'account alerts');
    await screenshot(page, 'alerts-account-list-desktop');
    // Cancel the price alert.
    await page.click('#alerts li[data-kind="price"] button');
    await page.waitForFunction(() => document.querySelectorAll('#alerts li').length === 1);
    const left = (await env.api.call('GET', '/v1/alerts', undefined, await tokenOf(name))).alerts;
    assert.deepEqual(left.map((a) => a.kind), ['stock']);
    await page.setViewportSize(PHONE);
    await fitsTheScreen(page);
    await screenshot(page, 'alerts-account-list-phone');
    assert.deepEqual(unexpected(problems), []);
  } finally {
    await context.close();
  }
});

// Issue 29, "the phone layout fixed for every page" and "an accessibility check of every page":
// every page of the site, signed in as a customer who is also a provider and holds a term rental
// and a spot lease (the journeys' pages with something on them), at 1440×900 and 390×844. On each:
// its data loads, axe-core finds no serious or critical violation, nothing is wider than the
// screen, every link of the header is visible and whole, no console error or failed request; a
// screenshot of each goes to tests/out/e2e/walk-<page>-<size>.png. (pages.test.mjs walks the
// pages signed out the same way.)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { newPage, screenshot } from './lib/browser.mjs';
import { username, waitForData, unexpected, useServerAndBrowser, logIn, headerLinksVisible } from './lib/helpers.mjs';
import { noSeriousViolations } from './lib/axe.mjs';

const env = useServerAndBrowser();
const SIZES = { desktop: { width: 1440, height: 900 }, phone: { width: 390, height: 844 } };
const MODEL = 'meta-llama/Llama-3.1-8B';

// A user with a rental, a lease, a machine with an ask, a top-up and an alert: each page has
// something to show.
async function story() {
  const name = username('walker');
  const token = await env.api.user(name, ['customer', 'provider']);
  await env.api.fund(token, '2000.00');
  const rental = await env.api.call('POST', '/v1/rentals', { gpu: 'A100 SXM', count: 2, term: 'week' }, token);
  const bid = await env.api.call('POST', '/v1/bids', { gpu: 'H100 SXM', gpus: 2, market: true, time_in_force: 'ioc' }, token);
  assert.equal(bid.status, 'filled', JSON.stringify(bid));
  const machine = await env.api.call('POST', '/v1/machines', { gpu: 'A100 PCIe', gpus: 4, region: 'IAD-1', vcpus: 64, ram_gb: 512, disk_gb: 4000 }, token);
  const until = new Date(Date.now() + 30 * 86400e3).toISOString().replace(/\.\d+Z$/, 'Z');
  await env.api.call('POST', '/v1/asks', { machine_id: machine.id, price_usd_per_gpu_hour: '1.700', min_gpus: 1, available_until: until }, token);
  await env.api.call('POST', '/v1/alerts', { kind: 'stock', gpu: 'L4', count: 1 }, token);
  return { name, rental, lease: bid.lease_id };
}

test('every page signed in, on a desktop and a phone: axe, the screen, the header', async () => {
  const s = await story();
  const pages = [
    ['catalog', '/', '.gpu-card'],
    ['calculator', `/calculator/?model=${encodeURIComponent(MODEL)}&workload=qlora`, '#total'],
    ['guide', '/guide/', '#cost-chart svg'],
    ['use-training', '/use/training/', '#fit-cards .use-card'],
    ['use-fine-tuning', '/use/fine-tuning/', '#fit-cards .use-card'],
    ['use-inference', '/use/inference/', '#fit-cards .use-card'],
    ['market', '/market/?gpu=H100%20SXM', '#bid-form:not([hidden])'],
    ['rent', '/rent/?gpu=H100%20SXM&count=8&term=month', '[data-testid="quote-total"]'],
    ['rent-none-free', '/rent/?gpu=L4&count=1&term=month', '[data-testid="quote-unavailable"]'],
    ['sell', '/sell/', '#sell-provider:not([hidden])'],
    ['instances', '/instances/', '#instance table'],
    ['instance-rental', `/instances/?rental=${s.rental.id}`, '.instance[data-kind="rental"]'],
    ['instance-lease', `/instances/?lease=${s.lease}`, '.instance[data-kind="lease"]'],
    ['invoice', s.rental.invoice.html, '#title'],
    ['account-overview', '/account/#overview', '#wallets table, #wallets .wallet'],
    ['account-storage', '/account/#storage-section', '#storage-section'],
    ['account-billing', '/account/#billing', '#billing-form'],
    ['account-ssh-keys', '/account/#ssh-keys', '#ssh-key-form'],
    ['account-history', '/account/#history', '#transfers table'],
    ['account-notifications', '/account/#notifications-section', '#alerts li'],
    ['account-api-keys', '/account/#api-keys', '#api-keys'],
  ];
  for (const [size, viewport] of Object.entries(SIZES)) {
    const { context, page, problems } = await newPage(env.chrome.browser, size, env.server.url);
    try {
      await page.setViewportSize(viewport);
      await logIn(page, s.name);
      for (const [name, path, ready] of pages) {
        await page.goto(path);
        await page.waitForSelector(ready, { state: 'attached', timeout: 15000 });
        await waitForData(page);
        await page.waitForLoadState('networkidle');
        const where = `${name} (${size})`;
        await noSeriousViolations(page, where);
        const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
        assert.ok(overflow <= 0, `${where}: ${overflow} px wider than the screen`);
        if (name !== 'invoice') await headerLinksVisible(page);
        if (name === 'account-notifications') {
          // The rental's notification names a time: in the reader's locale, not RFC 3339.
          const text = await page.locator('#notifications').innerText();
          assert.match(text, /is running until /);
          assert.doesNotMatch(text, /\d{4}-\d{2}-\d{2}T\d{2}:/, 'no raw timestamps in notifications');
        }
        await screenshot(page, `walk-${name}-${size}`);
      }
      assert.deepEqual(unexpected(problems), []);
    } finally {
      await context.close();
    }
  }
});

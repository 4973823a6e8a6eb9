// The market page (issue 29), from a fresh database with the demo book (A100 SXM and A100 PCIe
// both from $1.790, H100 SXM from $2.880, ...):
//  - trades happen through the API (a provider's two asks in A100 PCIe at 1.500 and 1.600, a
//    customer's three market buys ten minutes apart), which makes A100 PCIe the cheapest market
//    ($1.600 left); the page opens on it without ?gpu=, and ?gpu= still wins;
//  - the price-history chart has one point per trade the API returns, axes labelled in the shared
//    formats, the best offer's line and a caption with the last, lowest and highest price;
//    a market without trades says so;
//  - the buy form shows the cost of an hour for 2 GPUs at the shown price and the wallet's balance,
//    follows the count and the limit price, warns when the balance does not cover an hour;
//  - at 1440x900 and 390x844 the "If not filled at once" choice and the open bid's Cancel button are
//    not cut; axe-core finds no serious or critical violation.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { newPage, screenshot, OUT_DIR } from './lib/browser.mjs';
import { username, waitForData, unexpected, signUp, setBillingCountry, useServerAndBrowser, tokenOf as tokenOfUser } from './lib/helpers.mjs';
import { noSeriousViolations } from './lib/axe.mjs';

const env = useServerAndBrowser();
const DESKTOP = { width: 1440, height: 900 };
const PHONE = { width: 390, height: 844 };
const MARKET = 'A100 PCIe';

const tokenOf = (name) => tokenOfUser(env.api, name);

// Controls whose words do not fit in them: a button whose text overflows, a select narrower than
// its chosen option's text (measured with the select's own font), a control outside a box that
// clips it (a table's scrolling wrapper), anything past the screen's edge.
async function cutControls(page, selector) {
  return page.evaluate((sel) => {
    const out = [];
    const probe = document.createElement('span');
    probe.style.cssText = 'position:absolute;visibility:hidden;white-space:nowrap';
    document.body.appendChild(probe);
    for (const el of document.querySelectorAll(sel)) {
      if (el.offsetParent === null) continue;
      const r = el.getBoundingClientRect();
      const cs = getComputedStyle(el);
      let need = el.scrollWidth;
      let have = el.clientWidth;
      if (el.tagName === 'SELECT') {
        probe.style.font = cs.font;
        probe.textContent = el.options[el.selectedIndex].text;
        // The text box of a select: its width less the padding and the arrow (about 20 px).
        need = probe.offsetWidth;
        have = el.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight) - 20;
      }
      // Cut by a box that clips (a table's scrolling wrapper, a card): outside its edges.
      let clipped = false;
      for (let a = el.parentElement; a; a = a.parentElement) {
        if (getComputedStyle(a).overflowX === 'visible') continue;
        const b = a.getBoundingClientRect();
        if (r.right > b.right + 0.5 || r.left < b.left - 0.5) clipped = true;
      }
      if (need > have + 1 || clipped || r.right > window.innerWidth + 0.5 || r.left < 0) out.push(`${el.id || el.textContent.trim()}: needs ${need}, has ${have}${clipped ? ', cut by its box' : ''}`);
    }
    probe.remove();
    return out;
  }, selector);
}

test('market: the cheapest market first, the price history of its trades, the cost of an hour before buying', async () => {
  // Trades through the API: two asks in A100 PCIe under the demo's $1.790, three market buys.
  const provider = await env.api.user(username('prov'), ['provider']);
  const until = new Date(Date.now() + 30 * 86400e3).toISOString().replace(/\.\d+Z$/, 'Z');
  for (const [price, gpus] of [['1.500', 2], ['1.600', 4]]) {
    const m = await env.api.call('POST', '/v1/machines', { gpu: MARKET, gpus, region: 'IAD-1', vcpus: 64, ram_gb: 512, disk_gb: 4000 }, provider);
    await env.api.call('POST', '/v1/asks', { machine_id: m.id, price_usd_per_gpu_hour: price, min_gpus: 1, available_until: until }, provider);
  }
  const buyer = await env.api.user(username('buyer'), ['customer']);
  await env.api.fund(buyer, '100.00');
  for (const gpus of [2, 1, 1]) {
    const bid = await env.api.call('POST', '/v1/bids', { gpu: MARKET, gpus, market: true, time_in_force: 'ioc' }, buyer);
    assert.equal(bid.status, 'filled', JSON.stringify(bid));
    await env.server.advanceClock(600);
  }
  const api = await env.api.call('GET', `/v1/markets/${encodeURIComponent(MARKET)}/trades?limit=100`);
  assert.equal(api.trades.length, 3);
  assert.deepEqual(api.trades.map((t) => t.price_usd_per_gpu_hour).sort(), ['1.500', '1.600', '1.600']);
  const markets = (await env.api.call('GET', '/v1/markets')).markets;
  assert.equal(markets.find((m) => m.gpu === MARKET).best_ask_usd_per_gpu_hour, '1.600');

  for (const size of ['desktop', 'phone']) {
    const { context, page, problems } = await newPage(env.chrome.browser, size, env.server.url);
    try {
      await page.setViewportSize(size === 'desktop' ? DESKTOP : PHONE);
      const name = username('ada_' + size);
      await signUp(page, name);
      await setBillingCountry(page, 'US');
      await env.api.fund(await tokenOf(name), '10.00');
      // A resting bid far under the book, so "Your open bids" shows its Cancel button.
      await env.api.call('POST', '/v1/bids', { gpu: 'H100 SXM', gpus: 1, limit_usd_per_gpu_hour: '1.000', time_in_force: 'gtc' }, await tokenOf(name));

      await page.goto('/market/');
      await page.waitForSelector('#bid-form:not([hidden])');
      await page.waitForSelector('[data-testid="price-chart"] svg');
      await waitForData(page);
      assert.equal(await page.getAttribute('[role="tab"][aria-selected="true"]', 'data-gpu'), MARKET, 'the cheapest market is selected first');
      assert.match(page.url(), /\?gpu=A100\+PCIe$/);

      // The chart: a point per trade, the best offer's line, labelled axes, a text alternative.
      assert.equal(await page.locator('[data-testid="price-chart"] circle.trade-point').count(), api.trades.length);
      assert.equal(await page.locator('[data-testid="chart-ask"]').count(), 1);
      const yLabels = await page.locator('[data-testid="price-chart"] .axis text').allTextContents();
      assert.ok(yLabels.some((t) => /^\$1\.\d{3}\/h$/.test(t)), `price axis in perHour: ${yLabels}`);
      assert.match(await page.locator('[data-testid="chart-x-first"]').textContent(), /\d{2}:\d{2}/);
      assert.match(await page.locator('[data-testid="chart-x-last"]').textContent(), /\d{2}:\d{2}/);
      const label = await page.getAttribute('[data-testid="price-chart"] svg', 'aria-label');
      assert.equal(await page.getAttribute('[data-testid="price-chart"] svg', 'role'), 'img');
      assert.match(label, /last trade \$1\.600\/h; over the 3 trades from .+ to .+, low \$1\.500\/h, high \$1\.600\/h; best offer now \$1\.600\/h\./);
      assert.match(await page.locator('[data-testid="chart-summary"]').innerText(), /low \$1\.500\/h, high \$1\.600\/h/);

      // The cost of an hour: 2 GPUs at the shown best offer, and the wallet.
      assert.match(await page.locator('#stats').innerText(), /\$1\.600/);
      await page.fill('#bid-gpus', '2');
      assert.equal(await page.locator('[data-testid="bid-total"]').innerText(), '$3.20/h');
      assert.match(await page.locator('[data-testid="bid-total-how"]').innerText(), /^2 GPUs × \$1\.600\/GPU-h at the best offer/);
      // $10.00 less the hold of the resting bid ($1.00).
      assert.equal(await page.locator('[data-testid="bid-balance"]').innerText(), '$9.00 available in USD');
      assert.equal(await page.locator('[data-testid="bid-short"]').isHidden(), true);
      await page.fill('#bid-gpus', '7');
      assert.equal(await page.locator('[data-testid="bid-total"]').innerText(), '$11.20/h');
      await page.locator('[data-testid="bid-short"]').waitFor();
      assert.match(await page.locator('[data-testid="bid-short"]').innerText(), /\(\$9\.00\) does not cover one hour \(\$11\.20\)/);
      await page.fill('#bid-gpus', '2');
      assert.equal(await page.locator('[data-testid="bid-short"]').isHidden(), true);
      // At my price: the limit is the price, and the "if not filled" choice is readable.
      await page.check('input[name="order"][value="limit"]');
      await page.fill('#bid-limit', '1.550');
      assert.equal(await page.locator('[data-testid="bid-total"]').innerText(), '$3.10/h');
      assert.match(await page.locator('[data-testid="bid-total-how"]').innerText(), /^2 GPUs × \$1\.550\/GPU-h at your limit, the most it pays/);
      await page.locator('#my-bids table').waitFor();
      assert.deepEqual(await cutControls(page, '#bid-form button, #bid-tif, #bid-expires, #bid-currency, #bid-region, .segmented span, #my-bids button'), []);
      assert.deepEqual(await page.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth]), [size === 'desktop' ? 1440 : 390, size === 'desktop' ? 1440 : 390], 'nothing wider than the screen');
      await page.locator('[data-testid="price-chart"]').screenshot({ path: join(OUT_DIR, `market-chart-${size}.png`) });
      await page.locator('#bid-form').screenshot({ path: join(OUT_DIR, `market-form-${size}.png`) });
      await noSeriousViolations(page, `market (${size})`);
      await page.evaluate(() => window.scrollTo(0, 0));
      await screenshot(page, `market-history-${size}`);

      // The URL's market wins; a market without trades says so.
      await page.goto('/market/?gpu=H100%20NVL');
      await page.waitForSelector('[data-testid="price-chart-empty"]');
      assert.equal(await page.getAttribute('[role="tab"][aria-selected="true"]', 'data-gpu'), 'H100 NVL');
      assert.match(await page.locator('[data-testid="price-chart-empty"]').innerText(), /No trades yet in the H100 NVL market.+best offer now is \$3\.190\/h/);
      await noSeriousViolations(page, `market without trades (${size})`);
      assert.deepEqual(unexpected(problems), []);
    } finally {
      await context.close();
    }
  }
});

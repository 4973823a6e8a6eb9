// The provider page (/sell/), in a real browser against a real server: a customer account sees why
// it cannot sell and adds the provider role; it lists a machine and places an ask through the page
// (API errors beside their fields, the ask placed with the keyboard); the ask is on the market's
// book (API and market page); a customer renting from it shows as a lease with the provider's
// earnings; a payout is requested; cancelling the ask takes it off the book. Screenshots of the
// page on a desktop and a phone screen.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { newPage, screenshot } from './lib/browser.mjs';
import { username, waitForData, unexpected, signUp, useServerAndBrowser } from './lib/helpers.mjs';

const env = useServerAndBrowser();

const BOOK = '/v1/markets/H100%20SXM/book?levels=10';

async function errorFor(page, id) {
  await page.waitForFunction((sel) => document.querySelector(sel)?.textContent.length > 0, '#' + id);
  return page.locator('#' + id).innerText();
}

test('a provider lists a machine and an ask on the page; the ask is on the book, earns, and cancel takes it off', async () => {
  const { context, page, problems } = await newPage(env.chrome.browser, 'desktop', env.server.url);
  try {
    // A customer account: the page says why it cannot sell, and adds the provider role.
    await signUp(page, username('sam'));
    await page.click('nav a[href="/sell/"]');
    await page.waitForSelector('#sell-not-provider:not([hidden])');
    assert.match(await page.locator('#sell-not-provider').innerText(), /Selling needs the provider role/);
    assert.equal(await page.locator('#sell-provider').isVisible(), false);
    await page.click('#become-provider');
    await page.waitForSelector('#sell-provider:not([hidden])');
    await waitForData(page);
    assert.match(await page.locator('#earnings').innerText(), /Available to pay out\s*\$0\.00/i);
    assert.match(await page.locator('#machines').innerText(), /No machines yet/);

    // List a machine: a refused vCPU count is shown beside its field, then the machine is listed.
    await page.selectOption('#m-gpu', 'H100 SXM');
    await page.fill('#m-gpus', '8');
    await page.selectOption('#m-region', 'IAD-1');
    await page.fill('#m-vcpus', '0');
    await page.fill('#m-ram', '1024');
    await page.fill('#m-disk', '8000');
    await page.click('#machine-submit');
    assert.match(await errorFor(page, 'err-m-vcpus'), /^vCPUs must be between 1 and 4096\.$/);
    assert.equal(await page.locator('#m-vcpus').getAttribute('aria-invalid'), 'true');
    await page.fill('#m-vcpus', '104');
    await page.click('#machine-submit');
    await page.locator('#machine-result .alert-ok').waitFor();
    const listed = await page.locator('#machine-result').innerText();
    const machineId = /Machine #(\d+) listed/.exec(listed)?.[1];
    assert.ok(machineId, listed);
    assert.match(listed, /8 × H100 SXM in IAD-1/);
    await page.locator('#machines table').waitFor();
    const machineRow = await page.locator('#machines tbody tr').first().innerText();
    assert.match(machineRow, /8 × H100 SXM/);
    assert.match(machineRow, /IAD-1/);
    assert.match(machineRow, /0 of 8/);
    // The demo has no agent for it: a simulated host sells it, and says so.
    assert.match(machineRow, /simulated host/);
    assert.match(machineRow, /demo: simulated host, no real machine/);
    assert.equal(await page.locator('#a-machine').inputValue(), machineId, 'the new machine is selected in the ask form');
    assert.match(await page.locator('#help-a-price').innerText(), /Best offer in the H100 SXM market now: \$2\.880/);

    // Place the ask with the keyboard: a price with too many decimals is refused beside the field.
    await page.focus('#a-price');
    await page.keyboard.type('2.8805');
    await page.keyboard.press('Enter');
    assert.match(await errorFor(page, 'err-a-price'), /at most 3 decimals/);
    assert.equal(await page.evaluate(() => document.activeElement?.id), 'a-price', 'the focus stays on the field in error');
    await page.keyboard.press('Control+A');
    await page.keyboard.type('2.790');
    // The earnings at that price before placing it: 8 GPUs × $2.790 = $22.32 an hour, less the
    // 10% fee ($2.232, rounded half-even on the hour's total) = $20.088.
    assert.match(await page.locator('[data-testid="ask-estimate"]').innerText(),
      /^You get \$20\.09 an hour while all 8 GPUs of machine #\d+ are leased at \$2\.790\/GPU-h \(customers pay \$22\.32, the platform's fee is \$2\.23\): \$482\.11 a day, \$14,463\.36 for 30 days\./);
    await page.keyboard.press('Enter');
    await page.locator('#ask-result .alert-ok').waitFor();
    const placed = await page.locator('#ask-result').innerText();
    assert.match(placed, /Ask #\d+ is on the H100 SXM book at \$2\.790\/GPU-h with 8 GPUs offered/);
    await page.locator('#asks table').waitFor();
    const askRow = await page.locator('#asks tbody tr').first().innerText();
    assert.match(askRow, /\$2\.790/);
    assert.match(askRow, /open/);
    assert.match(await page.locator('#machines tbody tr').first().innerText(), /on the book/);

    // The ask is the best offer of the H100 SXM book: by API and on the market page.
    let book = await env.api.call('GET', BOOK);
    assert.deepEqual(book.asks[0], { price_usd_per_gpu_hour: '2.790', gpus: 8, orders: 1 });
    const market = await context.newPage();
    await market.goto('/market/?gpu=H100%20SXM');
    await market.waitForSelector('#depth svg .level-ask');
    assert.match(await market.locator('#stats').innerText(), /Best offer\s*\$2\.790/i);
    await market.close();

    // A customer rents 2 GPUs at the best offer (by API): the lease and the earnings show here.
    const customer = await env.api.user(username('renter'), ['customer']);
    await env.api.fund(customer, '100.00');
    const bid = await env.api.call('POST', '/v1/bids', { gpu: 'H100 SXM', gpus: 2, market: true, time_in_force: 'ioc' }, customer);
    assert.equal(bid.status, 'filled');
    assert.equal(bid.lease.price_usd_per_gpu_hour, '2.790');
    await page.reload();
    await page.waitForSelector('#sell-provider:not([hidden])');
    await waitForData(page);
    await page.locator('#provider-leases table').waitFor();
    const leaseRow = await page.locator('#provider-leases tbody tr').first().innerText();
    assert.match(leaseRow, /2 × H100 SXM/);
    assert.match(leaseRow, /running/);
    assert.match(leaseRow, /\$5\.02/, '2 GPUs x $2.790 less the 10% fee = $5.022 per hour');
    assert.match(await page.locator('#earnings').innerText(), /GPU-hours sold\s*2/i);
    assert.match(await page.locator('#machines tbody tr').first().innerText(), /2 of 8/);
    const available = await page.locator('#earnings').getAttribute('data-available');

    // A payout asks where the money goes: without a destination the form says so and cannot be
    // sent; a Bitcoin address with a wrong checksum is refused beside the address; a good one is
    // listed and chosen.
    assert.equal(await page.locator('#payout-needs-destination').isVisible(), true);
    assert.equal(await page.locator('#payout-submit').isDisabled(), true);
    await page.selectOption('#d-kind', 'btc');
    await page.fill('#d-label', 'cold');
    await page.fill('#d-address', 'bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t5');
    await page.click('#destination-form button[type="submit"]');
    assert.match(await errorFor(page, 'err-d-address'), /checksum/i);
    await page.fill('#d-address', 'bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4');
    await page.click('#destination-form button[type="submit"]');
    await page.locator('#destinations li').waitFor();
    assert.match(await page.locator('#destinations li').innerText(), /cold\s+Bitcoin\s+bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4/);
    assert.equal(await page.locator('#payout-needs-destination').isVisible(), false);
    assert.match(await page.locator('#p-destination option:checked').innerText(), /^cold \(Bitcoin bc1qw508d6…v8f3t4\)$/);
    // More than is available is refused beside the amount; a small one is pending, to "cold".
    await page.fill('#p-amount', '100.00');
    await page.click('#payout-submit');
    assert.match(await errorFor(page, 'err-p-amount'), /at most/);
    if (Number(available) >= 1) {
      await page.fill('#p-amount', '1.00');
      await page.click('#payout-submit');
      await page.locator('#payout-result .alert-ok').waitFor();
      assert.match(await page.locator('#payout-result').innerText(), /\$1\.00 to cold \(Bitcoin/);
      await page.locator('#payouts table').waitFor();
      assert.match(await page.locator('#payouts tbody tr').first().innerText(), /\$1\.00[\s\S]*cold[\s\S]*pending/);
    }

    await page.evaluate(() => window.scrollTo(0, 0));
    await screenshot(page, 'sell-signed-in-desktop');
    await page.setViewportSize({ width: 390, height: 844 });
    await page.waitForTimeout(200);
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert.ok(overflow <= 0, `the page is ${overflow}px wider than a phone screen`);
    await screenshot(page, 'sell-signed-in-phone');
    await page.setViewportSize({ width: 1366, height: 900 });

    // Cancel the ask (keyboard): it is cancelled, its GPUs leave the book, the lease runs on.
    await page.focus('#asks button:has-text("Cancel")');
    await page.keyboard.press('Enter');
    await page.waitForFunction(() => /cancelled/.test(document.querySelector('#asks tbody tr')?.textContent || ''));
    assert.equal(await page.locator('#asks button:has-text("Cancel")').count(), 0);
    book = await env.api.call('GET', BOOK);
    assert.ok(!book.asks.some((l) => l.price_usd_per_gpu_hour === '2.790'), JSON.stringify(book.asks));
    assert.equal(book.asks[0].price_usd_per_gpu_hour, '2.880', 'the opening ask is the best offer again');
    assert.match(await page.locator('#provider-leases tbody tr').first().innerText(), /running/);
    await page.locator('#machines tbody tr button:has-text("Offer")').waitFor();

    assert.deepEqual(unexpected(problems, ['/v1/machines', '/v1/asks', '/v1/payouts', '/v1/payout-destinations', 'status of 400', 'status of 402']), []);
  } finally {
    await context.close();
  }
});

// The paths people take, in a real browser against a real server:
//  - sign up -> log out -> log in with the keyboard -> top up -> the signed webhook (signed here
//    with the secret the test gave the server) -> the balance and the transfer appear by themselves;
//  - a market buy opens a lease that shows on the page, and the stop button ends it;
//  - an API error is shown next to the field it names;
//  - the calculator's numbers and its URL state.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { newPage, screenshot } from './lib/browser.mjs';
import { PASSWORD, username, waitForData, unexpected, signUp, setBillingCountry, useServerAndBrowser, accountTab } from './lib/helpers.mjs';

const env = useServerAndBrowser();

// From the focused username field of the sign-up or log-in form: types the username, Tab, the
// password, Enter, and waits for the signed-in account page with its data.
async function typeCredentials(page, name) {
  await page.keyboard.type(name);
  await page.keyboard.press('Tab');
  await page.keyboard.type(PASSWORD);
  await page.keyboard.press('Enter');
  await page.waitForSelector('#signed-in:not([hidden])');
  await waitForData(page);
}

// Creates an invoice on the account page, settles it with a signed webhook, and waits for the
// page to show the new balance on its own.
async function topUp(page, amount, expectedBalance) {
  await page.fill('#topup-amount', amount);
  await page.selectOption('#topup-currency', 'USD');
  await page.click('#topup-form button[type="submit"]');
  const invoice = page.locator('#invoice .invoice[data-status="new"]');
  await invoice.waitFor();
  const invoiceId = await invoice.getAttribute('data-invoice');
  assert.match(invoiceId, /^inv_/);
  const settled = await env.server.settleInvoice(invoiceId);
  assert.equal(settled.status, 200, JSON.stringify(settled.body));
  assert.equal(settled.body.credited, true);
  await page.waitForFunction(
    (want) => document.querySelector('[data-testid="balance-USD"]')?.textContent === want,
    expectedBalance,
    { timeout: 15000 }
  );
  await page.locator('#invoice .invoice[data-status="settled"]').waitFor();
  return invoiceId;
}

test('sign up, log out, log in with the keyboard, top up, signed webhook: the balance appears', async () => {
  const { context, page, problems } = await newPage(env.chrome.browser, 'desktop', env.server.url);
  try {
    const name = username('ada');
    await signUp(page, name);
    assert.equal(await page.locator('#who').innerText(), name);
    assert.equal(await page.locator('#session-slot .who').innerText(), name, 'the header shows who is signed in');
    await page.waitForSelector('[data-testid="header-balance"]:not([hidden])');
    assert.equal(await page.locator('[data-testid="header-balance"]').innerText(), '$0.00', 'and the balance');
    assert.equal(await page.locator('[data-testid="balance-USD"]').innerText(), '$0.00');

    // The session is an HttpOnly, SameSite=Strict cookie the page's scripts cannot read.
    const cookies = await context.cookies();
    const session = cookies.find((c) => c.name === 'gpuhub_session');
    assert.ok(session, 'the session cookie is set');
    assert.equal(session.httpOnly, true);
    assert.equal(session.sameSite, 'Strict');
    assert.equal(await page.evaluate(() => document.cookie.includes('gpuhub_session')), false);

    await page.click('#logout');
    await page.waitForSelector('#signed-out:not([hidden])');
    assert.equal((await context.cookies()).some((c) => c.name === 'gpuhub_session'), false, 'log out clears the cookie');

    // Log in with the keyboard only: the focus moves to the username field after log out.
    await page.waitForFunction(() => document.activeElement?.id === 'login-username');
    await typeCredentials(page, name);

    // A wrong amount: the API's message shows next to the amount field.
    await page.fill('#topup-amount', '12.345');
    await page.click('#topup-form button[type="submit"]');
    await page.waitForFunction(() => document.querySelector('#err-topup-amount')?.textContent.length > 0);
    assert.match(await page.locator('#err-topup-amount').innerText(), /at most 2 decimals/);
    assert.equal(await page.locator('#topup-amount').getAttribute('aria-invalid'), 'true');

    await topUp(page, '250.00', '$250.00');
    await accountTab(page, 'history');
    const history = await page.locator('#transfers table').innerText();
    assert.match(history, /Top-up/);
    assert.match(history, /\+\$250\.00/);
    assert.match(await page.locator('#topups table').innerText(), /settled/);

    await screenshot(page, 'account-signed-in-desktop');
    await page.setViewportSize({ width: 390, height: 844 });
    await screenshot(page, 'account-signed-in-phone');
    assert.deepEqual(unexpected(problems, ['/v1/topups', 'status of 400']), []);
  } finally {
    await context.close();
  }
});

test('a market buy opens a lease visible on the page; stop ends it', async () => {
  // The provider side, by API: two more H100 SXM machines above the opening ask, and a resting bid
  // from another customer below it, so the book has depth on both sides.
  const provider = await env.api.user(username('prov'), ['provider']);
  const until = new Date(Date.now() + 30 * 86400e3).toISOString().replace(/\.\d+Z$/, 'Z');
  for (const [price, gpus] of [['2.950', 8], ['3.100', 4]]) {
    const m = await env.api.call('POST', '/v1/machines', { gpu: 'H100 SXM', gpus, region: 'IAD-1', vcpus: 104, ram_gb: 1024, disk_gb: 8000 }, provider);
    await env.api.call('POST', '/v1/asks', { machine_id: m.id, price_usd_per_gpu_hour: price, min_gpus: 1, available_until: until }, provider);
  }
  const other = await env.api.user(username('bidder'), ['customer']);
  await env.api.fund(other, '100.00');
  const resting = await env.api.call('POST', '/v1/bids', { gpu: 'H100 SXM', gpus: 2, limit_usd_per_gpu_hour: '2.500', time_in_force: 'gtc' }, other);
  assert.equal(resting.status, 'resting');

  const { context, page, problems } = await newPage(env.chrome.browser, 'desktop', env.server.url);
  try {
    await signUp(page, username('grace'));
    await setBillingCountry(page, 'US'); // a purchase needs one; US has no tax: the figures stay net
    await topUp(page, '100.00', '$100.00');

    await page.click('nav a[href="/market/"]');
    await page.waitForSelector('#bid-form:not([hidden])');
    await page.click('[role="tab"][data-gpu="H100 SXM"]');
    await page.waitForSelector('#depth svg .level-bid');
    await waitForData(page);
    assert.equal(await page.locator('#depth svg .level-ask').count(), 3, 'three ask levels: 2.880, 2.950, 3.100');
    assert.match(await page.locator('#stats').innerText(), /\$2\.500/, 'the resting bid is the best bid');

    // A limit price with too many decimals: the error sits under the limit field.
    await page.check('input[name="order"][value="limit"]');
    await page.fill('#bid-limit', '2.8805');
    await page.click('#bid-submit');
    await page.waitForFunction(() => document.querySelector('#err-bid-limit')?.textContent.length > 0);
    assert.match(await page.locator('#err-bid-limit').innerText(), /at most 3 decimals/);

    // A limit bid under the best offer rests in the book with an expiry, holds one hour, and can
    // be cancelled.
    await page.fill('#bid-limit', '2.000');
    await page.fill('#bid-gpus', '2');
    await page.selectOption('#bid-tif', 'gtc');
    const expires = new Date(Date.now() + 30 * 86400e3);
    const pad = (n) => String(n).padStart(2, '0');
    const local = `${expires.getFullYear()}-${pad(expires.getMonth() + 1)}-${pad(expires.getDate())}T18:00`;
    await page.fill('#bid-expires', '2099-12-31T18:00');
    await page.click('#bid-submit');
    await page.waitForFunction(() => document.querySelector('#err-bid-expires')?.textContent.length > 0);
    assert.match(await page.locator('#err-bid-expires').innerText(), /within 366 days/);
    await page.fill('#bid-expires', local);
    await page.click('#bid-submit');
    await page.locator('#bid-result .alert-info').waitFor();
    assert.match(await page.locator('#bid-result').innerText(), /in the book at up to \$2\.000\/GPU-h; \$4\.00 is held/);
    await page.locator('#my-bids table').waitFor();
    assert.match(await page.locator('#my-bids table').innerText(), /\$2\.000/);
    await page.click('#my-bids button:has-text("Cancel")');
    await page.waitForSelector('#my-bids-card', { state: 'hidden' });

    // Buy 2 GPUs at the best offer.
    await page.check('input[name="order"][value="market"]');
    await page.fill('#bid-gpus', '2');
    await page.focus('#bid-submit');
    await page.keyboard.press('Enter');
    const result = page.locator('#bid-result .alert-ok');
    await result.waitFor();
    const text = await result.innerText();
    assert.match(text, /Filled: lease #\d+/);
    assert.match(text, /2 × H100 SXM at \$2\.880\/GPU-h/);
    assert.match(text, /\$5\.76 per hour/);

    const leases = page.locator('#leases table');
    await leases.waitFor();
    const row = leases.locator('tbody tr').first();
    assert.match(await row.innerText(), /2 × H100 SXM/);
    assert.match(await row.innerText(), /running/);
    assert.match(await row.innerText(), /\$5\.76/);
    await page.locator('#trades table').waitFor();
    assert.match(await page.locator('#trades table').innerText(), /\$2\.880/);

    await page.evaluate(() => window.scrollTo(0, 0));
    await screenshot(page, 'market-signed-in-desktop');
    await page.setViewportSize({ width: 390, height: 844 });
    await page.waitForTimeout(400); // the depth chart redraws at the new width
    await screenshot(page, 'market-signed-in-phone');
    await page.setViewportSize({ width: 1366, height: 900 });

    // The first hour was charged from the wallet.
    await page.goto('/account/');
    await page.waitForSelector('#signed-in:not([hidden])');
    await waitForData(page);
    assert.equal(await page.locator('[data-testid="balance-USD"]').innerText(), '$94.24');
    await page.goBack();
    await page.waitForSelector('#leases table');

    // Stop: a second, confirming click.
    await page.click('#leases button:has-text("Stop")');
    await page.click('#leases button:has-text("Confirm stop")');
    await page.waitForFunction(() => /stopped/.test(document.querySelector('#leases tbody tr')?.textContent || ''));
    assert.equal(await page.locator('#leases button:has-text("Stop")').count(), 0);
    assert.deepEqual(unexpected(problems, ['/v1/bids', 'status of 400']), []);
  } finally {
    await context.close();
  }
});

test('the calculator: 70b at FP8 needs 75 GB and one H100 PCIe; the URL carries the state', async () => {
  const { context, page, problems } = await newPage(env.chrome.browser, 'desktop', env.server.url);
  try {
    await page.goto('/calculator/');
    await page.waitForSelector('#total');
    await page.selectOption('#m-preset', '70b');
    await page.selectOption('#workload', 'infer');
    await page.selectOption('#precision', 'fp8');
    await page.click('#calc button[type="submit"]');
    await page.waitForFunction(() => document.querySelector('#total')?.textContent === '75 GB');
    await page.waitForFunction(() => /one H100 PCIe/.test(document.querySelector('#verdict')?.textContent || ''));
    assert.match(await page.locator('#verdict').innerText(), /\$1,490\.00\/month/);
    const best = page.locator('#results table tbody tr.best');
    assert.match(await best.innerText(), /H100 PCIe/);
    assert.match(await best.innerText(), /5\.32 GB/, 'headroom 80 - 74.68');
    assert.match(await best.innerText(), /28\.6 tok\/s/, 'decode ceiling');
    // The stacked bar has one segment per component, and the arithmetic shows each formula.
    assert.equal(await page.locator('.stack-bar .seg').count(), 3);
    await page.click('#arithmetic summary');
    // The formulas render once the <details> is open: wait for them instead of reading at once.
    await page.locator('#arithmetic').getByText(/70e9 params/).first().waitFor({ state: 'visible' });
    const formulas = await page.locator('#arithmetic').innerText();
    assert.match(formulas, /70e9 params x 1\.0 B\/param \(fp8\) = 70\.00 GB/);
    assert.match(formulas, /2 x 80 layers x 8 kv heads x 128 head_dim x 2 B \(fp16\) x 8192 tokens x batch 1 = 2\.68 GB/);

    // The URL reproduces the result in a fresh page.
    const url = page.url();
    assert.match(url, /model=70b/);
    assert.match(url, /precision=fp8/);
    const second = await context.newPage();
    await second.goto(url);
    await second.waitForFunction(() => document.querySelector('#total')?.textContent === '75 GB');
    assert.equal(await second.locator('#precision').inputValue(), 'fp8');
    await second.close();

    // A training workload hides the inference-only fields; a bad context is refused next to it.
    await page.selectOption('#workload', 'full');
    await page.waitForFunction(() => document.querySelector('#context').closest('[data-for]').hidden);
    await page.selectOption('#workload', 'infer');
    await page.fill('#context', '0');
    await page.click('#calc button[type="submit"]');
    await page.waitForFunction(() => document.querySelector('#err-context')?.textContent.length > 0);
    assert.match(await page.locator('#err-context').innerText(), /^Context must be between 1 and 10,000,000 tokens, got 0\.$/);
    assert.equal(await page.locator('#context').getAttribute('aria-invalid'), 'true');

    // A real model picked from the bundled list.
    await page.fill('#context', '8192');
    await page.check('input[name="source"][value="bundled"]');
    await page.selectOption('#m-bundled', 'meta-llama/Llama-3.1-8B');
    await page.click('#calc button[type="submit"]');
    await page.waitForFunction(() => /Llama-3\.1-8B/.test(document.querySelector('#results')?.textContent || ''));
    assert.match(page.url(), /model=meta-llama%2FLlama-3\.1-8B/);
    assert.deepEqual(unexpected(problems, ['/v1/size', '/v1/fit', 'status of 400']), []);
  } finally {
    await context.close();
  }
});

// Presses Tab until the focus is on `selector` (at most `max` times): proves the control is
// reachable with the keyboard, in the page's order.
async function tabTo(page, selector, max = 60, key = 'Tab') {
  for (let i = 0; i < max; i++) {
    if (await page.evaluate((s) => document.activeElement?.matches(s), selector)) return;
    await page.keyboard.press(key);
  }
  throw new Error(`${selector} was not reached with ${max} Tab presses`);
}

test('keyboard only: sign up, top up, buy at the best offer, stop the lease', async () => {
  const { context, page, problems } = await newPage(env.chrome.browser, 'desktop', env.server.url);
  try {
    const name = username('kbd');
    await page.goto('/account/');
    await page.waitForSelector('#signed-out:not([hidden])');
    await tabTo(page, '#signup-username');
    await typeCredentials(page, name);

    await tabTo(page, '#topup-amount');
    await page.keyboard.type('50.00');
    await page.keyboard.press('Enter');
    const invoice = page.locator('#invoice .invoice[data-status="new"]');
    await invoice.waitFor();
    assert.equal((await env.server.settleInvoice(await invoice.getAttribute('data-invoice'))).status, 200);
    await page.waitForFunction(() => document.querySelector('[data-testid="balance-USD"]')?.textContent === '$50.00', null, { timeout: 15000 });

    // The billing country a purchase needs, on the account's "Billing and invoices" tab: back to
    // the tab strip with Shift+Tab, Enter opens it; then the country chosen by typing into the select.
    await tabTo(page, '.account-tabs a[href="#billing"]', 60, 'Shift+Tab');
    await page.keyboard.press('Enter');
    await page.waitForSelector('#billing-form');
    await tabTo(page, '#billing-country');
    await page.keyboard.type('United States (US)');
    assert.equal(await page.locator('#billing-country').inputValue(), 'US');
    await tabTo(page, '#billing-form button[type="submit"]');
    await page.keyboard.press('Enter');
    await page.waitForSelector('#billing-status[data-state="complete"]');

    // To the market through the navigation, then to the A100 SXM tab with the arrow keys.
    await page.evaluate(() => document.activeElement?.blur());
    await page.keyboard.press('Tab'); // the skip link comes first
    await tabTo(page, 'nav a[href="/market/"]');
    await page.keyboard.press('Enter');
    await page.waitForSelector('#bid-form:not([hidden])');
    await waitForData(page);
    await tabTo(page, '[role="tab"][aria-selected="true"]');
    for (let i = 0; i < 12; i++) {
      if ((await page.getAttribute('[role="tab"][aria-selected="true"]', 'data-gpu')) === 'A100 SXM') break;
      await page.keyboard.press('ArrowRight');
    }
    assert.equal(await page.getAttribute('[role="tab"][aria-selected="true"]', 'data-gpu'), 'A100 SXM');
    await page.waitForSelector('#depth svg');
    await tabTo(page, '#bid-gpus');
    await page.keyboard.press('Control+A');
    await page.keyboard.type('1');
    await tabTo(page, '#bid-submit');
    await page.keyboard.press('Enter');
    await page.locator('#bid-result .alert-ok').waitFor();
    assert.match(await page.locator('#bid-result').innerText(), /1 × A100 SXM at \$1\.790\/GPU-h/);

    await page.locator('#leases table').waitFor();
    await tabTo(page, '#leases button');
    await page.keyboard.press('Enter');
    // The confirmation takes the focus: Enter confirms.
    await page.waitForFunction(() => document.activeElement?.textContent === 'Confirm stop');
    await page.keyboard.press('Enter');
    await page.waitForFunction(() => /stopped/.test(document.querySelector('#leases tbody tr')?.textContent || ''));
    assert.deepEqual(unexpected(problems), []);
  } finally {
    await context.close();
  }
});

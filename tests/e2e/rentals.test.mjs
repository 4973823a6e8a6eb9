// Term rentals in a real browser against a real server on the manual clock:
//  - rent from the catalog's Rent action (2x A100 SXM for a week: $532.00), the renewal invoice
//    appears on the account page once the clock reaches T-24h, pay it, and after T the term has
//    extended from the old end;
//  - unpaid: stopped and held (the page says when the data is destroyed), then released with the
//    data destroyed; an early release goes through a confirmation that says no refund is made;
//  - a short wallet gets the server's top-up invoice for the shortfall on the rent page;
//  - without a billing country the order is refused with a link to the billing form; a German
//    buyer's quote adds VAT DE 19% and the rental links its tax invoice, whose page says the same.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { newPage, screenshot } from './lib/browser.mjs';
import { PASSWORD, username, waitForData, unexpected, signUp, setBillingCountry, useServerAndBrowser } from './lib/helpers.mjs';

const env = useServerAndBrowser();
const DAY = 86400;

// The bearer token of a user signed up through the page, to fund it the way the payment processor
// would (a settled top-up) without going through the top-up form again.
async function tokenOf(name) {
  return (await env.api.call('POST', '/v1/sessions', { username: name, password: PASSWORD })).token;
}

// Refreshes the account page's rentals and waits until the page shows the new answer.
async function refreshRentals(page) {
  const loads = Number(await page.locator('#rentals').getAttribute('data-loads'));
  await page.click('#refresh-rentals');
  await page.waitForFunction((n) => Number(document.querySelector('#rentals').dataset.loads) > n, loads);
  await waitForData(page);
}

function rental(page, id) {
  return page.locator(`#rentals article.rental[data-rental="${id}"]`);
}

test('rent from the catalog, the renewal invoice appears, pay it: the term extends', async () => {
  const { context, page, problems } = await newPage(env.chrome.browser, 'desktop', env.server.url);
  try {
    const name = username('rita');
    await signUp(page, name);
    await setBillingCountry(page, 'US'); // a purchase needs one; US has no tax: the figures stay net
    await env.api.fund(await tokenOf(name), '1100.00');

    await page.goto('/');
    await page.waitForSelector('.gpu-card[data-gpu="A100 SXM"]');
    await waitForData(page);
    const card = page.locator('.gpu-card[data-gpu="A100 SXM"]');
    assert.match(await card.locator('.stock').innerText(), /DFW-1 \d+ · IAD-1 \d+ · PDX-1 \d+/, 'live stock per region');
    await card.locator('a.rent').click();
    await page.waitForSelector('[data-testid="quote-total"]');
    assert.equal(await page.locator('#rent-title').innerText(), 'Rent A100 SXM');
    await page.selectOption('#rent-count', '2');
    await page.check('input[name="term"][value="week"]');
    await page.waitForFunction(() => document.querySelector('[data-testid="quote-total"]')?.textContent === '$532.00');
    const quote = await page.locator('#quote').innerText();
    assert.match(quote, /5% at 2 cards/);
    assert.match(quote, /−\$28\.00/);
    assert.match(page.url(), /count=2/);
    assert.match(page.url(), /term=week/);
    await page.uncheck('#rent-auto');
    assert.equal(await page.locator('#rent-submit').innerText(), 'Rent for $532.00');
    await page.click('#rent-submit');
    const done = page.locator('[data-testid="rent-done"]');
    await done.waitFor();
    const id = await done.getAttribute('data-rental');
    await screenshot(page, 'rent-done-desktop');

    assert.equal(await done.locator('[data-testid="rent-invoice"]').count(), 1, 'the rental links its tax invoice');
    await done.locator('a[href^="/account/"]').click();
    await page.waitForSelector('#signed-in:not([hidden])');
    await waitForData(page);
    const item = rental(page, id);
    assert.equal(await item.getAttribute('data-state'), 'active');
    assert.match(await item.locator('.next').innerText(), /renewal invoice in (6 d 0 h|5 d 23 h)/);
    assert.equal(await page.locator('[data-testid="balance-USD"]').innerText(), '$568.00');

    // Six days later (T - 24 h): the renewal invoice, on the page and in the notifications.
    await env.server.advanceClock(6 * DAY);
    await refreshRentals(page);
    const invoice = item.locator('.renewal[data-status="open"]');
    await invoice.waitFor();
    assert.match(await invoice.innerText(), /Renewal invoice: \$532\.00 for the next week/);
    assert.match(await item.locator('.next').innerText(), /stops unless the renewal is paid in (1 d 0 h|23 h 59 min)/);
    assert.match(await page.locator('#notifications').innerText(), /Renewal invoice for rental \d+ \(2x A100 SXM/);
    await screenshot(page, 'account-rental-invoice-desktop');

    await invoice.locator('.pay-renewal').click();
    await item.locator('.renewal[data-status="paid"]').waitFor();
    await page.waitForFunction(() => document.querySelector('[data-testid="balance-USD"]')?.textContent === '$36.00');

    // After T: the paid term has started, counted from the old end.
    const before = await item.locator('.term').innerText();
    await env.server.advanceClock(DAY + 3600);
    await refreshRentals(page);
    const after = await rental(page, id).locator('.term').innerText();
    assert.match(after, /^2: /, 'term 2 runs');
    assert.equal(after.split('–')[0].replace(/^2: /, '').trim(), before.split('–')[1].trim(), 'term 2 starts where term 1 ended');
    assert.equal(await rental(page, id).getAttribute('data-state'), 'active');
    assert.deepEqual(unexpected(problems), []);
  } finally {
    await context.close();
  }
});

test('unpaid: stopped and held, then released with the data destroyed; early release is confirmed', async () => {
  const { context, page, problems } = await newPage(env.chrome.browser, 'phone', env.server.url);
  try {
    const name = username('ursula');
    await signUp(page, name);
    await setBillingCountry(page, 'US');
    const token = await tokenOf(name);
    await env.api.fund(token, '1000.00');
    const unpaid = await env.api.call('POST', '/v1/rentals', { gpu: 'RTX 3090', count: 1, term: 'week', auto_renew: false }, token);
    const early = await env.api.call('POST', '/v1/rentals', { gpu: 'RTX A5000', count: 2, term: 'week' }, token);
    await refreshRentals(page);

    // An early release: the confirmation says what is lost before anything happens.
    const item = rental(page, early.id);
    await item.locator('button.release').click();
    const confirm = item.locator('.release-confirm');
    assert.match(await confirm.innerText(), /Nothing of the term is refunded/);
    assert.match(await confirm.innerText(), /cannot be recovered/);
    await confirm.locator('.confirm-release').click();
    await page.waitForFunction((id) => document.querySelector(`article.rental[data-rental="${id}"]`)?.dataset.state === 'released', early.id);

    // The week runs out unpaid: stopped, held 72 h, the page says until when.
    await env.server.advanceClock(7 * DAY + 60);
    await refreshRentals(page);
    const held = rental(page, unpaid.id);
    assert.equal(await held.getAttribute('data-state'), 'stopped');
    assert.match(await held.locator('.hold').innerText(), /after that the disk's data is destroyed/);
    assert.match(await held.locator('.renewal[data-status="open"]').innerText(), /\$65\.00/);
    await screenshot(page, 'account-rental-held-phone');

    await env.server.advanceClock(3 * DAY);
    await refreshRentals(page);
    const gone = rental(page, unpaid.id);
    assert.equal(await gone.getAttribute('data-state'), 'released');
    assert.match(await gone.innerText(), /unpaid\); data destroyed/);
    assert.equal(await gone.locator('button.release').count(), 0);
    assert.match(await page.locator('#notifications').innerText(), /was released: the renewal was not paid/);
    assert.deepEqual(unexpected(problems), []);
  } finally {
    await context.close();
  }
});

test('a short wallet gets a top-up invoice for the shortfall on the rent page', async () => {
  const { context, page, problems } = await newPage(env.chrome.browser, 'desktop', env.server.url);
  try {
    await signUp(page, username('sam'));
    await setBillingCountry(page, 'US');
    await page.goto('/rent/?gpu=H100%20SXM&count=8&term=month');
    await page.waitForFunction(() => document.querySelector('[data-testid="quote-total"]')?.textContent === '$12,168.00');
    assert.match(await page.locator('#quote').innerText(), /10% at 8 cards/);
    await page.click('#rent-submit');
    const short = page.locator('[data-testid="rent-shortfall"]');
    await short.waitFor();
    assert.match(await short.innerText(), /You need \$12,168\.00 more in your USD wallet/);
    const pay = short.locator('a.btn');
    assert.equal(await pay.innerText(), 'Pay a top-up of $12,168.00');
    assert.match(await pay.getAttribute('href'), /inv_[0-9a-f]{24}$/);
    // The region that has none says so, and the choice is kept in the URL.
    await page.selectOption('#rent-region', 'DFW-1');
    assert.match(page.url(), /region=DFW-1/);
    assert.deepEqual(unexpected(problems, ['/v1/rentals', 'status of 402']), []);
  } finally {
    await context.close();
  }
});

test('a rental needs a billing country, adds its VAT and links its tax invoice', async () => {
  const { context, page, problems } = await newPage(env.chrome.browser, 'desktop', env.server.url);
  try {
    const name = username('greta');
    await signUp(page, name);
    await env.api.fund(await tokenOf(name), '2000.00');
    await page.goto('/rent/?gpu=H100%20SXM&count=1&term=week');
    await page.waitForSelector('[data-testid="quote-total"]');
    await page.uncheck('#rent-auto');
    await page.click('#rent-submit');
    const ask = page.locator('[data-testid="rent-billing"]');
    await ask.waitFor();
    assert.match(await ask.innerText(), /Set your billing country first/);
    assert.equal(await ask.locator('a').getAttribute('href'), '/account/#billing');

    await setBillingCountry(page, 'DE');
    await page.goto('/rent/?gpu=H100%20SXM&count=1&term=week');
    await page.waitForFunction(() => /VAT DE 19%/.test(document.querySelector('#quote')?.innerText || ''));
    const total = await page.locator('[data-testid="quote-total"]').innerText();
    await page.uncheck('#rent-auto');
    assert.equal(await page.locator('#rent-submit').innerText(), 'Rent for ' + total);
    await page.click('#rent-submit');
    const link = page.locator('[data-testid="rent-invoice"]');
    await link.waitFor();
    const number = await link.innerText();
    assert.match(number, /^\d{4}-\d{6}$/);
    await page.goto(await link.getAttribute('href'));
    assert.equal(await page.locator('#title').innerText(), 'Invoice ' + number);
    const totals = await page.locator('#totals').innerText();
    assert.match(totals, /VAT 19% \(DE\)/);
    assert.ok(totals.includes(total.replace('$', '') + ' USD'), 'the invoice total is the quoted total: ' + totals);
    assert.deepEqual(unexpected(problems, ['/v1/rentals', 'status of 400']), []);
  } finally {
    await context.close();
  }
});

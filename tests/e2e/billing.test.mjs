// Billing in a real browser against a real server:
//  - a new account's billing details say a country is needed; a market buy without one is refused
//    and the page points to the billing form;
//  - the form shows the API's errors beside their fields (a VAT id of the wrong shape), then saves
//    and says what tax applies (19% in Germany);
//  - the market buy then shows the tax on top of the net price;
//  - after the month ends (the admin moves the manual clock) the monthly invoice is listed on the
//    account page; its printable page opens and its PDF downloads, holding the invoice's gross.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { newPage, screenshot } from './lib/browser.mjs';
import { PASSWORD, username, waitForData, unexpected, signUp, useServerAndBrowser, accountTab } from './lib/helpers.mjs';

const env = useServerAndBrowser();

// How documents print an amount: its exact decimals, at least 2.
function printed(amount) {
  let s = amount;
  const dot = s.indexOf('.');
  while (s.length > dot + 3 && s.endsWith('0')) s = s.slice(0, -1);
  return s;
}

async function marketBuy(page, gpus) {
  await page.goto('/market/');
  await page.waitForSelector('#bid-form:not([hidden])');
  await page.click('[role="tab"][data-gpu="H100 SXM"]');
  await waitForData(page);
  await page.check('input[name="order"][value="market"]');
  await page.fill('#bid-gpus', String(gpus));
  await page.click('#bid-submit');
  await page.waitForSelector('#bid-result .alert');
  return page.locator('#bid-result').innerText();
}

test('billing details, a taxed purchase, and the monthly invoice listed, viewed and downloaded', async () => {
  const { context, page, problems } = await newPage(env.chrome.browser, 'desktop', env.server.url);
  try {
    const name = username('hedy');
    await signUp(page, name);
    await accountTab(page, 'billing');
    await page.waitForSelector('#billing-status[data-state="missing"]');
    assert.match(await page.locator('#billing-status').innerText(), /billing country before your first purchase/);
    const token = (await env.api.call('POST', '/v1/sessions', { username: name, password: PASSWORD })).token;
    await env.api.fund(token, '500.00');

    // No country yet: the market page refuses the buy and says where to set it.
    const refused = await marketBuy(page, 1);
    assert.match(refused, /Set your billing country first/);
    await page.click('#bid-result a[href="/account/#billing"]');
    await page.waitForSelector('#signed-in:not([hidden])');
    await waitForData(page);
    await page.waitForFunction(() => document.querySelectorAll('#billing-country option').length > 200);

    // A VAT id of the wrong shape: the error sits under the VAT field.
    await page.selectOption('#billing-country', 'DE');
    await page.fill('#billing-business', 'Hedy Labs');
    await page.fill('#billing-vat', 'DE12');
    await page.fill('#billing-address', 'Unter den Linden 1\n10117 Berlin');
    await page.click('#billing-form button[type="submit"]');
    await page.waitForFunction(() => document.querySelector('#err-billing-vat')?.textContent.length > 0);
    assert.match(await page.locator('#err-billing-vat').innerText(), /shape of a VAT id of Germany/);
    assert.equal(await page.locator('#billing-vat').getAttribute('aria-invalid'), 'true');
    // Without the VAT id: a consumer rate, 19%.
    await page.fill('#billing-vat', '');
    await page.click('#billing-form button[type="submit"]');
    await page.waitForSelector('#billing-status[data-state="complete"]');
    assert.match(await page.locator('#billing-status').innerText(), /Germany: 19% is added to each purchase/);
    const profile = await env.api.call('GET', '/v1/billing-profile', undefined, token);
    assert.equal(profile.billing_country, 'DE');
    assert.equal(profile.address, 'Unter den Linden 1\n10117 Berlin');

    // The buy goes through, with the tax on top of the net price (2.880/h + 19%).
    const filled = await marketBuy(page, 1);
    assert.match(filled, /Filled: lease #\d+/);
    assert.match(filled, /\$2\.88 per hour \+ \$0\.55 tax \(VAT 19% \(DE\)\) = \$3\.43/);

    // The month ends: the tick issues the statement. (A month of manual clock also ends the
    // browser's 30-day session: log in again.)
    const now = new Date(await env.server.advanceClock(1));
    const next = Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1);
    await env.server.advanceClock(Math.ceil((next - now.getTime()) / 1000) + 1);
    const fresh = (await env.api.call('POST', '/v1/sessions', { username: name, password: PASSWORD })).token;
    const list = await env.api.call('GET', '/v1/invoices', undefined, fresh);
    assert.equal(list.invoices.length, 1);
    const inv = list.invoices[0];
    await page.goto('/account/');
    await page.waitForSelector('#signed-out:not([hidden]), #signed-in:not([hidden])');
    if (await page.locator('#signed-out').isVisible()) {
      await page.fill('#login-username', name);
      await page.fill('#login-password', PASSWORD);
      await page.click('#login-form button[type="submit"]');
    }
    await page.waitForSelector('#signed-in:not([hidden])');
    await waitForData(page);
    await accountTab(page, 'billing');
    const row = page.locator('#documents tbody tr').first();
    await row.waitFor();
    const rowText = await row.innerText();
    assert.match(rowText, new RegExp(inv.number));
    assert.match(rowText, /Spot GPU usage/);
    await screenshot(page, 'account-billing-desktop');

    // The printable page.
    const [view] = await Promise.all([context.waitForEvent('page'), row.locator(`a:has-text("${inv.number}")`).click()]);
    await view.waitForLoadState();
    assert.match(await view.locator('#title').innerText(), new RegExp('Invoice ' + inv.number));
    const totals = await view.locator('#totals').innerText();
    assert.match(totals, new RegExp(printed(inv.gross).replace('.', '\\.') + ' USD'));
    assert.match(await view.locator('#buyer').innerText(), /Hedy Labs \(hedy_/);
    await view.close();

    // The PDF downloads and holds the same gross.
    const [download] = await Promise.all([page.waitForEvent('download'), row.locator('a:has-text("PDF")').click()]);
    assert.equal(download.suggestedFilename(), `gpuhub-${inv.number}.pdf`);
    const file = await download.path();
    assert.equal(readFileSync(file).subarray(0, 5).toString(), '%PDF-');
    const text = execFileSync('pdftotext', ['-q', '-layout', file, '-'], { encoding: 'utf8' });
    assert.match(text, new RegExp('Invoice ' + inv.number));
    assert.ok(text.includes(printed(inv.gross) + ' USD'), text);
    assert.ok(text.includes('VAT 19% (DE)'), text);

    assert.deepEqual(unexpected(problems, ['/v1/bids', '/v1/billing-profile', 'status of 400', '/v1/sessions/current', 'status of 401']), []);
  } finally {
    await context.close();
  }
});

// Multi-node quote requests in a real browser against a real server: the calculator's answer for
// a job no node holds (the guide's 405B full fine-tune, 7,452 GB) links to the quote form with the
// job filled in; the form needs a signed-in account, names a bad field, and sends the job; the
// page shows the server's own recomputation (5 x 8x MI300X at the list price); the account page
// lists the request and, once an admin answered, the price; the guide's "nothing fits" cells link
// to the form too; axe-core finds no serious or critical violation; nothing is wider than a phone.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { newPage, screenshot } from './lib/browser.mjs';
import { logIn, unexpected, username, useServerAndBrowser, waitForData } from './lib/helpers.mjs';
import { seriousViolations } from './lib/axe.mjs';
import { usd } from '../../web/assets/format.js';

const env = useServerAndBrowser();

async function noSeriousViolations(page, what) {
  const v = await seriousViolations(page);
  assert.deepEqual(v, [], `${what}: ${JSON.stringify(v, null, 1)}`);
}

test('a job no node holds: the calculator links to the quote form, which sends it and shows the server\'s figures', async () => {
  const name = username('quote');
  const token = await env.api.user(name, ['customer']);
  const { context, page, problems } = await newPage(env.chrome.browser, 'desktop', env.server.url);
  try {
    await page.goto('/calculator/?model=405b&workload=full');
    await page.waitForSelector('#verdict #quote-link');
    const href = await page.locator('#quote-link').getAttribute('href');
    const q = new URLSearchParams(href.split('?')[1]);
    assert.equal(q.get('model'), '405b');
    assert.equal(q.get('workload'), 'full');
    assert.match(await page.locator('#verdict').innerText(), /No node of the fleet holds it/);

    // Signed out: the form is filled in but cannot be sent; it says how to sign in.
    await page.click('#quote-link');
    await page.waitForURL('**/quote/**');
    await page.waitForSelector('#quote-signin:not([hidden])');
    assert.equal(await page.inputValue('#q-model'), '405b');
    assert.equal(await page.inputValue('#q-workload'), 'full');
    assert.equal(await page.locator('#quote-form button[type="submit"]').isDisabled(), true);
    await noSeriousViolations(page, 'quote form, signed out');

    await logIn(page, name);
    await page.goto(href);
    await page.waitForSelector('#quote-form button[type="submit"]:not([disabled])');
    // A bad field is named next to it, and nothing is sent.
    await page.fill('#q-seq', '-3');
    await page.click('#quote-form button[type="submit"]');
    await page.waitForSelector('#q-seq[aria-invalid="true"]');
    assert.notEqual(await page.locator('[data-error-for="seq"]').innerText(), '');
    assert.equal((await env.api.call('GET', '/v1/quote-requests', undefined, token)).quote_requests.length, 0);

    await page.fill('#q-seq', '');
    await page.fill('#q-contact', '@e2e:matrix.org');
    await page.fill('#q-note', 'three months from July');
    await page.click('#quote-form button[type="submit"]');
    await page.waitForSelector('#quote-sent');
    const sent = (await env.api.call('GET', '/v1/quote-requests', undefined, token)).quote_requests;
    assert.equal(sent.length, 1);
    const full = await env.api.call('GET', `/v1/quote-requests/${sent[0].id}`, undefined, token);
    assert.equal(full.summary, '405b full: 7,452 GB; 5 nodes of 8x MI300X (7,680 GB)');
    assert.equal(full.contact, '@e2e:matrix.org');
    const result = await page.locator('#quote-sent').innerText();
    assert.ok(result.includes(full.summary), result);
    const first = full.sizing.nodes[0];
    assert.equal(first.configuration, '5 x 8x MI300X');
    assert.ok(result.includes(first.configuration), result);
    assert.ok(result.includes(usd(first.exact.monthly_usd) + '/month'), result);
    assert.ok(result.includes('$57,240.00/month'), result);
    await noSeriousViolations(page, 'quote form, sent');
    await screenshot(page, 'quote-desktop');

    // The account's list; an admin's answer shows there.
    await page.goto('/account/#quote-requests');
    await waitForData(page);
    await page.waitForSelector('#quote-requests .quote-row');
    let row = await page.locator('#quote-requests .quote-row').first().innerText();
    assert.ok(row.includes(full.summary) && row.includes('open'), row);
    const admin = await env.server.adminToken();
    await env.api.call('POST', `/v1/admin/quote-requests/${full.id}/answer`, { status: 'answered', price: '$55,000/month for 5 nodes', terms: '3 months minimum' }, admin);
    await page.reload();
    await waitForData(page);
    await page.waitForSelector('#quote-requests .quote-price');
    row = await page.locator('#quote-requests .quote-row').first().innerText();
    assert.ok(row.includes('$55,000/month for 5 nodes') && row.includes('3 months minimum') && row.includes('answered'), row);
    await noSeriousViolations(page, 'account quote requests');

    // The guide's "nothing fits" cells link to the form with their job.
    await page.goto('/guide/');
    await page.waitForSelector('a.quote-link');
    const links = await page.locator('a.quote-link').evaluateAll((as) => as.map((a) => a.getAttribute('href')));
    assert.ok(links.includes('/quote/?model=405b&workload=full'), links.join(' '));
    assert.deepEqual(unexpected(problems, ['400']), []);
  } finally {
    await context.close();
  }
  const phone = await newPage(env.chrome.browser, 'phone', env.server.url);
  try {
    await phone.page.goto('/quote/?model=405b&workload=full');
    await phone.page.waitForSelector('#quote-signin:not([hidden])');
    assert.equal(await phone.page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth), true, 'nothing wider than the phone');
    await noSeriousViolations(phone.page, 'quote form on a phone');
    await screenshot(phone.page, 'quote-phone');
    assert.deepEqual(unexpected(phone.problems), []);
  } finally {
    await phone.context.close();
  }
});

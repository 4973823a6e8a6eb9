// API keys on the account page, in a real browser against a real server: a bad network refused
// beside its field, a key made with scopes and a daily cap whose secret shows once (and works as a
// bearer token, within its scopes), listed without its secret, revoked. Screenshot on desktop.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { newPage, screenshot } from './lib/browser.mjs';
import { username, unexpected, signUp, useServerAndBrowser, accountTab } from './lib/helpers.mjs';

const env = useServerAndBrowser();

test('API keys on the account page: refused beside the field, made once, listed, revoked', async () => {
  const { context, page, problems } = await newPage(env.chrome.browser, 'desktop', env.server.url);
  try {
    await signUp(page, username('kai'));
    await accountTab(page, 'api-keys');
    await page.locator('#api-key-list').waitFor();
    await page.waitForFunction(() => /No API keys/.test(document.querySelector('#api-key-list')?.textContent || ''));
    await page.fill('#api-key-name', 'ci');
    await page.check('#api-key-form input[value="read"]');
    await page.check('#api-key-form input[value="wallet-spend"]');
    await page.fill('#api-key-cap', '25.00');
    await page.fill('#api-key-cidrs', '10.0.0.1/8');
    await page.click('#api-key-submit');
    await page.waitForFunction(() => document.querySelector('#err-api-key-cidrs')?.textContent.length > 0);
    assert.match(await page.locator('#err-api-key-cidrs').innerText(), /^Only from these networks: '10\.0\.0\.1\/8' is not a network/);
    await page.fill('#api-key-cidrs', '127.0.0.0/8');
    await page.click('#api-key-submit');
    await page.locator('#api-key-secret code').waitFor();
    const secret = await page.locator('#api-key-secret code').innerText();
    assert.match(secret, /^ghk_1_[0-9a-f]{64}$/);
    await page.locator('#api-key-list table').waitFor();
    const row = await page.locator('#api-key-list tbody tr').first().innerText();
    assert.match(row, /ci/);
    assert.match(row, /read, wallet-spend/);
    assert.match(row, /0\.000000 of 25\.000000 USD/);
    assert.ok(!row.includes(secret.slice(6)), row);
    // The secret works as a bearer token for what its scopes allow, and no further.
    const wallets = await env.api.call('GET', '/v1/wallets', undefined, secret);
    assert.equal(wallets.wallets.length, 3);
    await assert.rejects(env.api.call('POST', '/v1/api-keys', { name: 'x', scopes: ['read'] }, secret), /403/);
    await page.locator('#api-keys').scrollIntoViewIfNeeded();
    await screenshot(page, 'account-api-keys-desktop');
    await page.click('#api-key-list button:has-text("Revoke")');
    await page.waitForFunction(() => /No API keys/.test(document.querySelector('#api-key-list')?.textContent || ''));
    await assert.rejects(env.api.call('GET', '/v1/wallets', undefined, secret), /401/);
    assert.deepEqual(unexpected(problems, ['/v1/api-keys', 'status of 400']), []);
  } finally {
    await context.close();
  }
});

// The audit log on the account page, in a real browser against a real server: after signing up
// (and so in), the page lists the account's events newest first from GET /v1/audit-log; a key
// made on the page appears as api_key_created, and no secret is on the page.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { newPage, screenshot } from './lib/browser.mjs';
import { username, unexpected, signUp, useServerAndBrowser, accountTab } from './lib/helpers.mjs';

const env = useServerAndBrowser();

test('audit log on the account page: the sign-in, a key made, newest first, no secret', async () => {
  const { context, page, problems } = await newPage(env.chrome.browser, 'desktop', env.server.url);
  try {
    await signUp(page, username('ava'));
    await accountTab(page, 'api-keys');  // the audit log sits with the keys, under Security
    await page.locator('#audit-log-list table').waitFor();
    assert.match(await page.locator('#audit-log-list tbody tr').first().innerText(), /sign in/);
    await page.fill('#api-key-name', 'ci');
    await page.check('#api-key-form input[value="read"]');
    await page.click('#api-key-submit');
    await page.locator('#api-key-secret code').waitFor();
    const secret = await page.locator('#api-key-secret code').innerText();
    await page.reload();
    await page.locator('#audit-log-list table').waitFor();
    const first = await page.locator('#audit-log-list tbody tr').first().innerText();
    assert.match(first, /api key created/);
    assert.match(first, /name: ci/);
    const text = await page.locator('#audit-log').innerText();
    assert.ok(!text.includes(secret.slice(6)), 'the key secret is on the page');
    await page.locator('#audit-log').scrollIntoViewIfNeeded();
    await screenshot(page, 'account-audit-log-desktop');
    assert.deepEqual(unexpected(problems, []), []);
  } finally {
    await context.close();
  }
});

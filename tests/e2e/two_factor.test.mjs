// Two-factor sign-in on the account page, in a real browser against a real server: set up shows
// the otpauth:// URI as a QR code (decoded back when zbarimg is installed) and the secret, a code from it turns two-factor on and shows 10 recovery
// codes once, and the login form then asks for the code (its field appears when the API names
// totp_code) and signs in with it. Codes are computed here from the secret (RFC 6238) at the
// server's manual clock. Screenshot on desktop.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { newPage, screenshot } from './lib/browser.mjs';
import { PASSWORD, username, unexpected, signUp, useServerAndBrowser, accountTab } from './lib/helpers.mjs';

const env = useServerAndBrowser();

function base32Decode(text) {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
  let bits = 0, value = 0;
  const out = [];
  for (const c of text.replace(/=+$/, '')) {
    value = (value << 5) | alphabet.indexOf(c);
    bits += 5;
    if (bits >= 8) {
      out.push((value >>> (bits - 8)) & 0xff);
      bits -= 8;
    }
  }
  return Buffer.from(out);
}

function totp(secret, unixSeconds) {
  const counter = Buffer.alloc(8);
  counter.writeBigUInt64BE(BigInt(Math.floor(unixSeconds / 30)));
  const mac = createHmac('sha1', secret).update(counter).digest();
  const offset = mac[19] & 0x0f;
  const binary = (mac.readUInt32BE(offset) & 0x7fffffff) % 1_000_000;
  return String(binary).padStart(6, '0');
}

// A new TOTP step on the server's clock, and its code.
async function nextCode(secret) {
  const now = await env.server.advanceClock(30);
  return totp(secret, Date.parse(now) / 1000);
}

test('two-factor on the account page: set up, confirmed with a code, asked for at login', async () => {
  const { context, page, problems } = await newPage(env.chrome.browser, 'desktop', env.server.url);
  try {
    const name = username('tess');
    await signUp(page, name);
    await accountTab(page, 'api-keys');  // two-factor sits on the Security and API keys tab
    await page.waitForFunction(() => /Off/.test(document.querySelector('#totp-status')?.textContent || ''));
    await page.click('#totp-start');
    await page.locator('#totp-enrol code').first().waitFor();
    const [uri, base32] = await page.locator('#totp-enrol code').allInnerTexts();
    assert.match(uri, new RegExp(`^otpauth://totp/gpuhub:${name}\\?secret=${base32}&issuer=gpuhub`));
    assert.match(base32, /^[A-Z2-7]{32}$/);
    const secret = base32Decode(base32);
    // The QR code holds the URI: decoded from a screenshot of it by zbarimg (zbar-tools, which
    // scripts/install-deps.sh --with-test-tools installs).
    const png = await page.locator('#totp-qr svg').screenshot();
    const zbar = spawnSync('zbarimg', ['--version'], { encoding: 'utf8' });
    assert.equal(zbar.status, 0, 'zbarimg is missing: apt-get install zbar-tools');
    const file = join(mkdtempSync(join(tmpdir(), 'gpuhub-qr-')), 'qr.png');
    writeFileSync(file, png);
    const decoded = spawnSync('zbarimg', ['-q', '--raw', file], { encoding: 'utf8' });
    assert.equal(decoded.stdout.trim(), uri);

    // A wrong code is refused beside its field; the right one turns it on.
    await page.fill('#totp-code', '12345');
    await page.click('#totp-submit');
    await page.waitForFunction(() => document.querySelector('#err-totp-code')?.textContent.length > 0);
    await page.fill('#totp-code', await nextCode(secret));
    await page.click('#totp-submit');
    await page.locator('#totp-enrol .recovery-codes li').first().waitFor();
    assert.equal(await page.locator('#totp-enrol .recovery-codes li').count(), 10);
    await page.waitForFunction(() => /On since/.test(document.querySelector('#totp-status')?.textContent || ''));
    await page.locator('#two-factor').scrollIntoViewIfNeeded();
    await screenshot(page, 'account-two-factor-desktop');

    // Log out; the password alone now makes the form ask for the code.
    await page.click('#logout');
    await page.waitForSelector('#signed-out:not([hidden])');
    await page.fill('#login-username', name);
    await page.fill('#login-password', PASSWORD);
    await page.click('#login-form button[type="submit"]');
    await page.waitForSelector('#login-totp:not([hidden])');
    assert.match(await page.locator('#err-login-totp').innerText(), /two-factor code .* is required/);
    assert.ok(await page.locator('#signed-in').isHidden());
    await page.fill('#login-password', PASSWORD);
    await page.fill('#login-totp-code', await nextCode(secret));
    await page.click('#login-form button[type="submit"]');
    await page.waitForSelector('#signed-in:not([hidden])');
    assert.deepEqual(unexpected(problems, ['/v1/accounts/me/totp/confirm', '/v1/sessions', 'status of 400', 'status of 401']), []);
  } finally {
    await context.close();
  }
});

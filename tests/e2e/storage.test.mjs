// Storage in a real browser against a real server (--demo: 4 storage hosts of 500 TB per region)
// on the manual clock:
//  - rent with extra NVMe on the rent page (the quote's NVMe line and total), then on the account
//    page: create a volume, attach it to the rental, snapshot it, restore the snapshot into a new
//    volume; attached twice, the page warns that concurrent writers must coordinate; a bad size is
//    refused beside its field;
//  - the unpaid path on the manual clock: the day that cannot be paid turns the volume read-only
//    (the page says when it is detached and deleted), 72 h later it is detached, and the
//    notifications say so.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { newPage, screenshot } from './lib/browser.mjs';
import { PASSWORD, username, waitForData, unexpected, signUp, useServerAndBrowser, accountTab } from './lib/helpers.mjs';

const env = useServerAndBrowser();
const DAY = 86400;

async function tokenOf(name) {
  return (await env.api.call('POST', '/v1/sessions', { username: name, password: PASSWORD })).token;
}

// Reloads the account page (storage and notifications) and waits for its data.
async function reloadAccount(page) {
  await page.reload();
  await page.waitForSelector('#signed-in:not([hidden])');
  await page.waitForFunction(() => Number(document.querySelector('#storage').dataset.loads) > 0);
  await waitForData(page);
}

// Refreshes the Storage section and waits until it shows the new answer.
async function refreshStorage(page) {
  const loads = Number(await page.locator('#storage').getAttribute('data-loads'));
  await page.click('#refresh-storage');
  await page.waitForFunction((n) => Number(document.querySelector('#storage').dataset.loads) > n, loads);
  await waitForData(page);
}

function volume(page, id) {
  return page.locator(`#storage article[data-volume="${id}"]`);
}

// Waits until the section shows `n` volumes and returns their ids, newest first.
async function volumeIds(page, n) {
  await page.waitForFunction((k) => document.querySelectorAll('#storage article[data-volume]').length === k, n);
  return page.$$eval('#storage article[data-volume]', (els) => els.map((e) => e.dataset.volume));
}

test('rent with extra NVMe, then create a volume, attach it, snapshot it and restore it', async () => {
  const { context, page, problems } = await newPage(env.chrome.browser, 'desktop', env.server.url);
  try {
    const name = username('vera');
    await signUp(page, name);
    const token = await tokenOf(name);
    // A purchase needs a billing country (US: no tax, so the quotes below are net = gross).
    await env.api.call('PUT', '/v1/billing-profile', { billing_country: 'US' }, token);
    await env.api.fund(token, '1000.00');

    // The rent page: 2 TB of extra NVMe on a week of one A100 SXM: 280 + 2 x 2.10.
    await page.goto('/rent/?gpu=A100%20SXM&count=1&term=week&region=DFW-1');
    await page.waitForSelector('[data-testid="quote-total"]');
    await page.fill('#rent-nvme', '2');
    await page.dispatchEvent('#rent-nvme', 'change');
    await page.waitForFunction(() => document.querySelector('[data-testid="quote-total"]')?.textContent === '$284.20');
    assert.match(await page.locator('#quote').innerText(), /Extra NVMe\s+2 TB × \$2\.10 per week\s+\$4\.20/);
    assert.match(page.url(), /extra_nvme_tb=2/);
    // A fraction is refused beside the field, by the server.
    await page.fill('#rent-nvme', '1.5');
    await page.dispatchEvent('#rent-nvme', 'change');
    await page.waitForFunction(() => document.querySelector('#err-rent-nvme')?.textContent.includes('whole number'));
    await page.fill('#rent-nvme', '2');
    await page.dispatchEvent('#rent-nvme', 'change');
    await page.waitForFunction(() => document.querySelector('[data-testid="quote-total"]')?.textContent === '$284.20');
    await page.click('#rent-submit');
    const done = page.locator('[data-testid="rent-done"]');
    await done.waitFor();
    const rentalId = await done.getAttribute('data-rental');
    await screenshot(page, 'rent-extra-nvme-desktop');

    // The account page's Storage section.
    await page.goto('/account/#storage-section');
    await page.waitForSelector('#signed-in:not([hidden])');
    await waitForData(page);
    const section = page.locator('#storage');
    assert.match(await section.locator('.rental-storage').innerText(), /1 TB included \+ 2 TB extra NVMe/);
    assert.match(await section.locator('.rental-storage .egress').innerText(), /0\.000 of 4\.667 TB included/);

    // Bad input first: 0 TB is refused beside the size field, nothing is created.
    await page.selectOption('#volume-region', 'DFW-1');
    await page.fill('#volume-size', '0');
    await page.click('#volume-create');
    await page.waitForFunction(() => document.querySelector('#volume-form [data-error-for="size_tb"]')?.textContent !== '');
    assert.match(await section.locator('#volume-form [data-error-for="size_tb"]').innerText(), /^Size \(TB\) must be between 1 and 100\.$/);
    assert.equal(await section.locator('article[data-volume]').count(), 0);

    await page.fill('#volume-size', '3');
    await page.fill('#volume-name', 'dataset');
    await page.click('#volume-create');
    const [first] = await volumeIds(page, 1);
    const v = volume(page, first);
    assert.equal(await v.getAttribute('data-state'), 'active');
    assert.match(await v.locator('h3').innerText(), /Volume \d+ · dataset · 3 TB · DFW-1 · 3 copies/);
    assert.match(await v.locator('.cost').innerText(), /\$1\.40 the next day/);  // 3 x 14 / 30
    assert.match(await v.innerText(), /the next day is billed; if the wallet cannot pay it, the volume turns read-only at once/);

    // Attach it to the rental.
    await v.locator('select.attach-rental').selectOption(rentalId);
    await v.locator('button.attach').click();
    await page.waitForFunction((id) => document.querySelector(`#storage article[data-volume="${id}"] .attachment`) !== null, first);
    assert.match(await volume(page, first).locator('.attachments').innerText(), new RegExp(`rental ${rentalId} \\(1× A100 SXM\\)`));
    assert.equal(await volume(page, first).locator('.access').innerText(), 'read-write');

    // Snapshot it, then restore the snapshot into a new, larger volume.
    await volume(page, first).locator('button.snapshot').click();
    await page.waitForSelector('#storage article[data-snapshot]');
    const snap = page.locator('#storage article[data-snapshot]').first();
    assert.match(await snap.locator('h3').innerText(), new RegExp(`Snapshot \\d+ · 3 TB · DFW-1 · copy of volume ${first}`));
    await snap.locator('.restore-form input[name="size_tb"]').fill('4');
    await snap.locator('.restore-form button').click();
    const ids = await volumeIds(page, 2);
    const restored = volume(page, ids[0]);
    assert.match(await restored.locator('h3').innerText(), /4 TB · DFW-1/);
    assert.match(await restored.innerText(), /Restored from\s+snapshot \d+/);

    // The restored volume on the same rental too: two volumes there; the first on a second rental
    // would be shared: rent another instance and attach the first volume to it as well.
    const second = await env.api.call('POST', '/v1/rentals', { gpu: 'A100 SXM', count: 1, term: 'week', region: 'DFW-1' }, token);
    await refreshStorage(page);
    await volume(page, first).locator('select.attach-rental').selectOption(String(second.id));
    await volume(page, first).locator('button.attach').click();
    await page.waitForSelector(`#storage article[data-volume="${first}"] .concurrent-writers`);
    assert.match(await volume(page, first).locator('.concurrent-writers').innerText(), /concurrent writers must coordinate/);
    assert.match(await section.locator('[data-testid="storage-daily"]').innerText(), /10 TB of volumes and snapshots/);
    await screenshot(page, 'account-storage-desktop');
    assert.deepEqual(unexpected(problems, ['/v1/rentals/quote', '/v1/volumes', 'status of 400']), []);
  } finally {
    await context.close();
  }
});

test('unpaid: the volume turns read-only, then 72 h later it is detached; the page says when', async () => {
  const { context, page, problems } = await newPage(env.chrome.browser, 'phone', env.server.url);
  try {
    const name = username('walt');
    await signUp(page, name);
    await accountTab(page, 'storage-section');
    const token = await tokenOf(name);
    await env.api.call('PUT', '/v1/billing-profile', { billing_country: 'US' }, token);
    // A week of an RTX 3090 (65.00) and exactly one day of a 1 TB volume (14/30 = 0.466667 -> 0.47
    // as a top-up is whole cents: the wallet keeps 0.003333, less than the next day).
    await env.api.fund(token, '65.47');
    const rental = await env.api.call('POST', '/v1/rentals', { gpu: 'RTX 3090', count: 1, term: 'week', auto_renew: false }, token);
    const created = await env.api.call('POST', '/v1/volumes', { region: rental.region, size_tb: 1 }, token);
    await env.api.call('POST', `/v1/volumes/${created.id}/attach`, { rental_id: rental.id }, token);
    await refreshStorage(page);
    assert.equal(await volume(page, created.id).getAttribute('data-state'), 'active');

    // Day 2 cannot be paid: read-only at once, attached instances keep reading.
    await env.server.advanceClock(DAY);
    await reloadAccount(page);
    const v = volume(page, created.id);
    assert.equal(await v.getAttribute('data-state'), 'read_only');
    assert.equal(await v.locator('.access').innerText(), 'read-only');
    const unpaid = await v.locator('.unpaid').innerText();
    assert.match(unpaid, /Unpaid: read-only\./);
    assert.match(unpaid, /detached from every instance at .+, and deleted for good at .+ unless paid before/);
    assert.match(await v.locator('.attachments').innerText(), new RegExp(`rental ${rental.id}`));
    assert.match(await v.locator('button.pay-storage').innerText(), /Pay \$0\.47 now/);
    assert.match(await page.locator('#notifications').innerText(), /could not be paid for the day from/);
    await screenshot(page, 'account-storage-read-only-phone');

    // Paying with too little: the server's 402 is shown, nothing changes.
    await v.locator('button.pay-storage').click();
    await v.locator('.storage-alert .alert-error').waitFor();
    assert.match(await v.locator('.storage-alert').innerText(), /wallet holds/);

    // 72 h later: detached from the instance; deleted 7 days after that unless paid.
    const deleteAt = await v.locator('.delete-at').innerText();
    await env.server.advanceClock(3 * DAY);
    await reloadAccount(page);
    const detached = volume(page, created.id);
    assert.equal(await detached.getAttribute('data-state'), 'detached');
    assert.equal(await detached.locator('.access').innerText(), 'none');
    assert.equal(await detached.locator('.attachment').count(), 0);
    assert.match(await detached.locator('.unpaid').innerText(), /Unpaid: detached\./);
    assert.equal(await detached.locator('.delete-at').innerText(), deleteAt, 'the deletion time never moves');
    assert.match(await page.locator('#notifications').innerText(), /was detached from every instance\. It will be deleted at/);
    await screenshot(page, 'account-storage-detached-phone');
    assert.deepEqual(unexpected(problems, ['/pay', 'status of 402']), []);
  } finally {
    await context.close();
  }
});

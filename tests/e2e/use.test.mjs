// The use-case pages in a real browser against a real server: the engine's view for each use
// (GET /v1/use-cases/<use>) laid out as cards with why, the largest models one and eight cards hold
// and the reference's tokens/s; a provider's new ask shows as the live "from $X/h"; the tabs move
// between the uses; the cards not fit follow with their reason; nothing overflows a phone.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { newPage, screenshot } from './lib/browser.mjs';
import { unexpected, useServerAndBrowser } from './lib/helpers.mjs';
import { usd, integer } from '../../web/assets/format.js';

const env = useServerAndBrowser();

test('use-case pages: fit cards with why and live prices, unfit cards with the reason, tabs', async () => {
  // A fresh ask under the opening one: the inference page's "from" for the A100 SXM follows it.
  const provider = await env.api.user('use_provider', ['provider']);
  const machine = await env.api.call('POST', '/v1/machines', { gpu: 'A100 SXM', gpus: 4, region: 'IAD-1', vcpus: 32, ram_gb: 256, disk_gb: 1000 }, provider);
  const until = new Date(Date.now() + 10 * 86400e3).toISOString().replace(/\.\d+Z$/, 'Z');
  await env.api.call('POST', '/v1/asks', { machine_id: machine.id, price_usd_per_gpu_hour: '1.234', available_until: until }, provider);

  const { context, page, problems } = await newPage(env.chrome.browser, 'desktop', env.server.url);
  try {
    await page.goto('/use/inference/');
    await page.waitForSelector('#fit-cards .use-card');
    const view = await env.api.call('GET', '/v1/use-cases/inference');
    const a100 = view.cards.find((c) => c.name === 'A100 SXM');
    assert.equal(a100.spot.exact.from_usd_per_gpu_hour, '1.234');
    const card = page.locator('.use-card[data-gpu="A100 SXM"]');
    const text = await card.innerText();
    assert.ok(text.includes('from ' + usd(a100.spot.exact.from_usd_per_gpu_hour, 3) + '/h'), text);
    assert.ok(text.includes(integer(Math.round(a100.tokens_per_s)) + ' tokens/s'), text);
    for (const why of a100.why) assert.ok(text.includes(why), `${why} on the card`);
    assert.match(text, /1 card: .*8 cards: /s);
    assert.match(await page.locator('h1').innerText(), /GPUs for LLM inference/);
    const unfit = view.cards.filter((c) => !c.fit);
    assert.ok(unfit.length > 0);
    const rows = await page.locator('section[aria-labelledby="unfit-title"] tbody tr').allInnerTexts();
    assert.equal(rows.length, unfit.length);
    assert.ok(rows[0].includes(unfit[0].why[0]), rows[0]);
    await screenshot(page, 'use-inference-desktop');

    // The tabs: training's page, with its own view and title.
    await page.click('.use-tabs a[href="/use/training/"]');
    await page.waitForURL('**/use/training/');
    await page.waitForSelector('#fit-cards .use-card');
    const training = await env.api.call('GET', '/v1/use-cases/training');
    assert.equal(await page.locator('#fit-cards .use-card').first().getAttribute('data-gpu'), training.cards[0].name);
    assert.match(await page.locator('h1').innerText(), /GPUs for LLM training/);
    assert.deepEqual(unexpected(problems), []);
  } finally {
    await context.close();
  }
  const phone = await newPage(env.chrome.browser, 'phone', env.server.url);
  try {
    await phone.page.goto('/use/fine-tuning/');
    await phone.page.waitForSelector('#fit-cards .use-card');
    assert.equal(await phone.page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth), true, 'nothing wider than the phone');
    await screenshot(phone.page, 'use-fine-tuning-phone');
    assert.deepEqual(unexpected(phone.problems), []);
  } finally {
    await phone.context.close();
  }
});

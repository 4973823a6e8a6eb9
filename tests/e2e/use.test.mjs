// The use-case pages in a real browser against a real server: the engine's view for each use
// (GET /v1/use-cases/<use>) laid out as cards with why, the largest models one and eight cards hold
// and the reference's tokens/s; a provider's new ask shows as the live "from $X/h"; the tabs move
// between the uses; the cards not fit follow with their reason; nothing overflows a phone. The
// general uses (image-video, rendering, science) show each card's datasheet figures, the diffusion
// models it holds, Rent and Buy spot, and pass axe-core.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { newPage, screenshot } from './lib/browser.mjs';
import { unexpected, useServerAndBrowser } from './lib/helpers.mjs';
import { usd, integer, decimal } from '../../web/assets/format.js';
import { seriousViolations } from './lib/axe.mjs';

const env = useServerAndBrowser();

async function noSeriousViolations(page, what) {
  const v = await seriousViolations(page);
  assert.deepEqual(v, [], `${what}: ${JSON.stringify(v, null, 1)}`);
}

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

test('general use-case pages: datasheet figures, the diffusion models each card holds, Rent and Buy spot', async () => {
  const { context, page, problems } = await newPage(env.chrome.browser, 'desktop', env.server.url);
  try {
    // Science: the best value for FP64 first, its figures from the datasheet, its actions.
    await page.goto('/use/science/');
    await page.waitForSelector('#fit-cards .use-card');
    const science = await env.api.call('GET', '/v1/use-cases/science');
    const best = science.cards[0];
    assert.equal(best.fit, true);
    const first = page.locator('#fit-cards .use-card').first();
    assert.equal(await first.getAttribute('data-gpu'), best.name);
    const text = await first.innerText();
    assert.match(text, new RegExp('FP64\\s+' + decimal(best.general.fp64_tflops, 1).replace('.', '\\.') + ' TFLOPS \\('), 'the datasheet FP64 in the specs');
    assert.ok(text.includes(usd(best.value.usd_per_tflops_hour, 4) + ' per FP64 TFLOPS-hour'), text);
    for (const why of best.why) assert.ok(text.includes(why), `${why} on the card`);
    assert.equal(await first.locator('a.action-rent').getAttribute('href'), '/rent/?' + new URLSearchParams({ gpu: best.name, count: '1', term: 'month' }));
    assert.equal(await first.locator('a.action-spot').getAttribute('href'), '/market/?' + new URLSearchParams({ gpu: best.spot.name, count: '1' }));
    const l40s = science.cards.find((c) => c.name === 'L40S');
    assert.equal(l40s.fit, false);
    const unfit = await page.locator('section[aria-labelledby="unfit-title"] tbody tr').allInnerTexts();
    assert.ok(unfit.some((r) => r.includes('L40S') && r.includes(l40s.why[0])), unfit.join('\n'));
    await noSeriousViolations(page, 'science');
    await screenshot(page, 'use-science-desktop');

    // Image and video: which bundled diffusion models each card holds, as the engine sized them.
    await page.click('.use-tabs a[href="/use/image-video/"]');
    await page.waitForURL('**/use/image-video/');
    await page.waitForSelector('#fit-cards .use-card');
    const images = await env.api.call('GET', '/v1/use-cases/image-video');
    const rtx4090 = images.cards.find((c) => c.name === 'RTX 4090');
    const sdxl = rtx4090.diffusion.find((f) => f.name === 'sdxl');
    assert.equal(sdxl.fits, true);
    const card = page.locator('.use-card[data-gpu="RTX 4090"]');
    const cardText = await card.innerText();
    assert.ok(cardText.includes(`sdxl ${sdxl.setting}: holds it (${decimal(sdxl.card_gb, 1)} GB)`), cardText);
    const flux = rtx4090.diffusion.find((f) => f.name === 'flux.1-dev');
    assert.ok(cardText.includes(`flux.1-dev ${flux.setting}: no (${decimal(flux.offloaded_card_gb, 1)} GB even offloaded)`), cardText);
    assert.match(await page.locator('h1').innerText(), /GPUs for image and video generation/);
    await noSeriousViolations(page, 'image-video');

    // Rendering: a card without RT cores is not fit, and says why.
    await page.goto('/use/rendering/');
    await page.waitForSelector('#fit-cards .use-card');
    const rendering = await env.api.call('GET', '/v1/use-cases/rendering');
    const h100 = rendering.cards.find((c) => c.name === 'H100 SXM');
    assert.equal(h100.fit, false);
    const rows = await page.locator('section[aria-labelledby="unfit-title"] tbody tr').allInnerTexts();
    assert.ok(rows.some((r) => r.includes('H100 SXM') && r.includes('no RT cores')), rows.join('\n'));
    const fit = rendering.cards.filter((c) => c.fit);
    assert.ok(fit.every((c) => c.general.rt_cores > 0));
    assert.equal(await page.locator('#fit-cards .use-card').count(), fit.length);
    await noSeriousViolations(page, 'rendering');
    assert.deepEqual(unexpected(problems), []);
  } finally {
    await context.close();
  }
  const phone = await newPage(env.chrome.browser, 'phone', env.server.url);
  try {
    for (const use of ['image-video', 'rendering', 'science']) {
      await phone.page.goto(`/use/${use}/`);
      await phone.page.waitForSelector('#fit-cards .use-card');
      assert.equal(await phone.page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth), true, `${use}: nothing wider than the phone`);
      await noSeriousViolations(phone.page, `${use} on a phone`);
    }
    await screenshot(phone.page, 'use-science-phone');
    assert.deepEqual(unexpected(phone.problems), []);
  } finally {
    await phone.context.close();
  }
});

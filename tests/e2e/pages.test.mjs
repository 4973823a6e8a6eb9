// Every page, on a phone-sized and a desktop-sized screen: it loads, shows the API's data (no
// loading placeholder left), logs no console error, no failed request and no HTTP error, and is
// written as a screenshot to tests/out/e2e/.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { newPage, screenshot } from './lib/browser.mjs';
import { waitForData, useServerAndBrowser } from './lib/helpers.mjs';
import { seriousViolations } from './lib/axe.mjs';

const env = useServerAndBrowser();

const PAGES = [
  { name: 'catalog', path: '/', ready: '.gpu-card', check: checkCatalog },
  { name: 'calculator', path: '/calculator/?model=70b&workload=infer&precision=fp8', ready: '#total', check: checkCalculator },
  { name: 'guide', path: '/guide/', ready: '#shapes table', check: checkGuide },
  { name: 'market', path: '/market/?gpu=H100%20SXM', ready: '#depth svg', check: checkMarket },
  { name: 'account', path: '/account/', ready: '#signed-out:not([hidden])', check: checkAccount },
  { name: 'sell', path: '/sell/', ready: '#sell-signed-out:not([hidden])', check: checkSell },
  { name: 'rent', path: '/rent/?gpu=H100%20SXM&count=8&term=month', ready: '[data-testid="quote-total"]', check: checkRent },
  { name: 'use-training', path: '/use/training/', ready: '#fit-cards .use-card', check: checkUse('training') },
  { name: 'use-fine-tuning', path: '/use/fine-tuning/', ready: '#fit-cards .use-card', check: checkUse('fine-tuning') },
  { name: 'use-inference', path: '/use/inference/', ready: '#fit-cards .use-card', check: checkUse('inference') },
  { name: 'instances', path: '/instances/', ready: '#instance-signed-out:not([hidden])', check: checkInstances },
  { name: 'use-image-video', path: '/use/image-video/', ready: '#fit-cards .use-card', check: checkUse('image-video') },
  { name: 'use-rendering', path: '/use/rendering/', ready: '#fit-cards .use-card', check: checkUse('rendering') },
  { name: 'use-science', path: '/use/science/', ready: '#fit-cards .use-card', check: checkUse('science') },
  { name: 'quote', path: '/quote/?model=405b&workload=full', ready: '#quote-signin:not([hidden])', check: async (page) => assert.equal(await page.inputValue('#q-model'), '405b') },
];

// A use-case page: the engine's view (GET /v1/use-cases/<use>), fit cards first with why.
function checkUse(use) {
  return async (page) => {
    const view = await fetch(new URL(`/v1/use-cases/${use}`, page.url()).href).then((r) => r.json());
    const fit = view.cards.filter((c) => c.fit);
    assert.equal(await page.locator('#fit-cards .use-card').count(), fit.length);
    const first = page.locator('#fit-cards .use-card').first();
    assert.equal(await first.getAttribute('data-gpu'), fit[0].name, 'best value first');
    assert.match(await first.innerText(), /best value/);
    assert.equal(await page.locator('.use-tabs a[aria-current="page"]').getAttribute('href'), `/use/${use}/`);
    assert.equal(await page.locator('nav.nav a[aria-current="page"]').innerText(), 'Use cases');
  };
}

async function checkCatalog(page) {
  assert.equal(await page.locator('.gpu-card').count(), 15, 'the 15 cards of the term fleet');
  const h100 = page.locator('.gpu-card[data-gpu="H100 SXM"]');
  await assert.doesNotReject(h100.waitFor());
  const text = await h100.innerText();
  assert.match(text, /\$1,690\.00/, 'monthly price of the H100 SXM');
  assert.match(text, /\$475\.00/, 'weekly price');
  assert.match(text, /\$2\.35/, 'hourly price (1690 / 720)');
  assert.match(text, /from \$2\.880\/h/, 'live best offer of the exchange (the opening ask)');
  assert.match(text, /63 free now/, 'live stock: the demo fleet starts at the published free-now figure');
  assert.equal(await h100.locator('a.rent').getAttribute('href'), '/rent/?gpu=H100%20SXM');
  // Filters: FP8 only and 80 GB or more: MI300X, B200, H200 SXM, H100 SXM, H100 PCIe.
  await page.check('#f-fp8');
  await page.selectOption('#f-vram', '80');
  await page.waitForFunction(() => document.querySelectorAll('.gpu-card').length === 5);
  assert.match(page.url(), /fp8=1/);
  assert.match(page.url(), /vram=80/);
  await page.uncheck('#f-fp8');
  await page.selectOption('#f-vram', '');
}

async function checkCalculator(page) {
  assert.equal(await page.locator('#total').innerText(), '75 GB');
  assert.match(await page.locator('#verdict').innerText(), /one H100 PCIe/);
}

async function checkGuide(page) {
  // A few cells of the published tables, straight from GET /v1/guide.
  const inference = await page.locator('#inference table').innerText();
  assert.match(inference, /74\.68/);
  assert.match(inference, /144\.68/);
  const cheapest = await page.locator('#cheapest table').innerText();
  assert.match(cheapest, /4x A100 SXM/);
  assert.match(cheapest, /\$3,643\.20/);
  const kv = await page.locator('#kv table').innerText();
  assert.match(kv, /42\.95/);
  // LoRA/QLoRA with their activations, and the published figure beside where they differ, with
  // the reason under the table (the link of the mark leads to it).
  const training = await page.locator('#training table').innerText();
  assert.match(training, /18\.42 \(published 21 GB/);
  assert.match(training, /47\.31 \(published 51 GB/);
  const reasons = page.locator('#training .published-reasons li');
  assert.equal(await reasons.count(), 10);
  assert.match(await page.locator('#published-7b-lora').innerText(), /7B LoRA: published 21 GB; this arithmetic gives 18\.42 GB/);
  assert.equal(await page.locator('#training a[href="#published-70b-qlora"]').count(), 1);
}

async function checkMarket(page) {
  const stats = await page.locator('#stats').innerText();
  assert.match(stats, /\$2\.880/, 'best offer of the H100 SXM market');
  assert.ok((await page.locator('#depth svg .level-ask').count()) >= 1, 'at least one ask level drawn');
  assert.equal(await page.locator('#bid-signed-out').isVisible(), true, 'signed out: a log-in prompt instead of the form');
}

async function checkAccount(page) {
  assert.equal(await page.locator('#login-form').isVisible(), true);
  assert.equal(await page.locator('#signup-form').isVisible(), true);
}

async function checkRent(page) {
  // The seed's figure, and what a visitor without an account is told.
  assert.equal(await page.locator('[data-testid="quote-total"]').innerText(), '$12,168.00');
  assert.match(await page.locator('#quote').innerText(), /10% at 8 cards/);
  assert.equal(await page.locator('#rent-signin').isVisible(), true);
  assert.equal(await page.locator('#rent-submit').isDisabled(), true);
  assert.equal(await page.locator('#rent-count option').count(), 4, '1, 2, 4 or 8 cards');
}

async function checkInstances(page) {
  // Signed out: the way to log in, which comes back to the console.
  assert.match(await page.locator('#instance-login').getAttribute('href'), /^\/account\//);
}

async function checkSell(page) {
  // Signed out: what selling needs, and the way to an account; no provider forms.
  assert.match(await page.locator('#sell-signed-out').innerText(), /provider role/);
  assert.equal(await page.locator('#sell-signed-out a[href="/account/"]').isVisible(), true);
  assert.equal(await page.locator('#sell-provider').isVisible(), false);
  assert.equal(await page.locator('nav a[href="/sell/"]').isVisible(), true, 'Sell is in the navigation signed out too (issue 29)');
}


for (const p of PAGES) {
  for (const size of ['desktop', 'phone']) {
    test(`${p.name} page on a ${size} screen`, async () => {
      const { context, page, problems } = await newPage(env.chrome.browser, size, env.server.url);
      try {
        await page.goto(p.path, { waitUntil: 'load' });
        await page.waitForSelector(p.ready, { timeout: 10000 });
        await waitForData(page);
        await p.check(page);
        await page.waitForLoadState('networkidle');
        await screenshot(page, `${p.name}-${size}`);
        // Nothing overflows the screen sideways (tables scroll inside their own box).
        const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
        assert.ok(overflow <= 0, `the page is ${overflow}px wider than the screen`);
        // Accessibility (issue 29): axe-core finds nothing serious or critical.
        assert.deepEqual(await seriousViolations(page), [], 'axe-core: no serious or critical violation');
        assert.deepEqual(problems, [], 'no console errors, failed requests or HTTP errors');
      } finally {
        await context.close();
      }
    });
  }
}

// The calculator's "Time and cost to finish" section in a real browser against a real server:
//  - a LoRA job from the URL plans on the exchange's book: the verdict and the table are the API's
//    answer to exactly the body the page sent (model, workload, switches and the plan's fields);
//  - more epochs take proportionally longer (asked of the API, never written here);
//  - inference switches the inputs to a serving job (tokens a day, prompt and output, days);
//  - a refused assumption is shown beside its field; the URL carries plan_<field>;
//  - the arithmetic of the cheapest opens; nothing overflows a phone.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { newPage, screenshot } from './lib/browser.mjs';
import { recordBodies, unexpected, useServerAndBrowser } from './lib/helpers.mjs';
import { noSeriousViolations } from './lib/axe.mjs';
import { usd } from '../../web/assets/format.js';

const env = useServerAndBrowser();
const MODEL = 'meta-llama/Llama-3.1-8B';

// The plan of the section; not the page's second request (`gpu`: the calculator's cheapest to hold,
// planned alone for its own row).
function recordPlanBodies(page) {
  return recordBodies(page, '/v1/plan', (body) => !body.gpu);
}

function cost(option) {
  return option.best === 'spot' ? option.spot.exact.total_usd : option.term.exact.total_usd;
}

// Waits for the page to ask for a plan that passes `check` (the change just made: the page asks
// 250 ms after an input, later on a loaded machine) and to show the API's answer to it, and
// returns that answer. (A fixed 300 ms wait read the previous request when the page was late.)
async function expectPlan(page, bodies, check) {
  const deadline = Date.now() + 30000;
  let body;
  for (;;) {
    body = bodies.at(-1);
    try {
      assert.ok(body, 'the page asked for a plan');
      check(body);
      break;
    } catch (e) {
      if (Date.now() > deadline) throw e;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  // The page marks the results busy before it sends a request and clears the mark when it shows
  // the answer to its latest one.
  await page.waitForFunction(() => document.querySelector('#plan-verdict') && !document.querySelector('#plan-results').hasAttribute('aria-busy'));
  body = bodies.at(-1);
  check(body);
  const plan = await env.api.call('POST', '/v1/plan', { ...body, start: undefined });
  const verdict = await page.locator('#plan-verdict').innerText();
  assert.match(verdict, new RegExp('Cheapest to finish: .*' + plan.cheapest.gpu.replace(/ /g, '.')));
  assert.ok(verdict.includes(usd(cost(plan.cheapest))), `${verdict} names ${usd(cost(plan.cheapest))}`);
  const rows = await page.locator('#plan-results tbody tr').count();
  const held = await page.locator('[data-testid="plan-held"]').count();
  assert.ok(held <= 1);
  assert.equal(rows, plan.options.length + held, 'the cheapest options, and the cheapest to hold when not among them');
  return plan;
}

test('the plan section: a training job from the URL, more epochs, serving, a refused assumption', async () => {
  const provider = await env.api.user('plan_provider', ['provider']);
  const machine = await env.api.call('POST', '/v1/machines', { gpu: 'H100 SXM', gpus: 8, region: 'IAD-1', vcpus: 64, ram_gb: 512, disk_gb: 2000 }, provider);
  const until = new Date(Date.now() + 30 * 86400e3).toISOString().replace(/\.\d+Z$/, 'Z');
  await env.api.call('POST', '/v1/asks', { machine_id: machine.id, price_usd_per_gpu_hour: '2.100', available_until: until }, provider);

  const { context, page, problems } = await newPage(env.chrome.browser, 'desktop', env.server.url);
  const bodies = recordPlanBodies(page);
  try {
    await page.goto(`/calculator/?model=${encodeURIComponent(MODEL)}&workload=lora&batch=4&plan_tokens=300000000`);
    const plan = await expectPlan(page, bodies, (b) => {
      assert.equal(b.model, MODEL);
      assert.equal(b.workload, 'lora');
      assert.equal(b.batch, 4);
      assert.equal(b.tokens, 300000000);
      assert.equal(b.epochs, 1);
    });
    assert.equal(plan.prices, 'market');
    // The count typed without separators is repeated with them (issue 29: "100000000").
    assert.equal(await page.locator('[data-testid="echo-tokens"]').innerText(), '300,000,000 tokens');
    // The live ask priced the H100 rows.
    const h100 = plan.options.find((o) => o.gpu === 'H100 SXM' && o.spot);
    assert.ok(h100, 'an H100 SXM row priced on the book');
    assert.equal(h100.spot.exact.price_usd_per_gpu_hour, '2.100');
    assert.match(await page.locator('#plan-results').innerText(), /Error bar: the estimates were off by a median of/);

    // Twice the epochs: twice the hours of the same configuration.
    await page.fill('#plan-epochs', '2');
    const twice = await expectPlan(page, bodies, (b) => assert.equal(b.epochs, 2));
    const before = plan.options.find((o) => o.configuration === twice.cheapest.configuration) || twice.cheapest;
    const again = twice.options.find((o) => o.configuration === before.configuration);
    if (again && before !== twice.cheapest) assert.ok(Math.abs(again.hours - 2 * before.hours) < 1e-6);
    assert.match(page.url(), /[?&]plan_epochs=2(&|$)/);

    // The arithmetic of the cheapest.
    await page.click('#plan-arithmetic summary');
    const lines = await page.locator('#plan-arithmetic li').allInnerTexts();
    assert.ok(lines.some((l) => l.startsWith('FLOPs per token:')), lines.join('\n'));
    assert.ok(lines.some((l) => l.startsWith('hours:')), lines.join('\n'));
    await screenshot(page, 'calculator-plan-desktop');

    // A refused assumption is shown beside its field.
    await page.click('#plan-assumptions summary');
    await page.fill('#plan-utilisation', '2');
    await page.locator('#plan-utilisation').press('Enter');
    await page.waitForFunction(() => document.querySelector('#err-plan-utilisation')?.textContent.length > 0);
    assert.match(await page.locator('#err-plan-utilisation').innerText(), /fraction of the published peak/);
    assert.equal(await page.locator('#plan-utilisation').getAttribute('aria-invalid'), 'true');
    await page.fill('#plan-utilisation', '0.3');
    await page.locator('#plan-utilisation').press('Enter');
    const given = await expectPlan(page, bodies, (b) => assert.equal(b.utilisation, '0.3'));
    assert.equal(given.assumptions.utilisation, 0.3);

    // Inference: the inputs become a serving job.
    await page.selectOption('#workload', 'infer');
    const serving = await expectPlan(page, bodies, (b) => {
      assert.equal(b.workload, 'infer');
      assert.equal(b.tokens_per_day, 10000000);
      assert.equal(b.tokens, undefined);
    });
    assert.equal(serving.job.kind, 'serving');
    assert.equal(await page.locator('#plan-tokens').isVisible(), false);
    assert.equal(await page.locator('#plan-tokens_per_day').isVisible(), true);
    assert.deepEqual(unexpected(problems, ['/v1/plan', 'status of 400']), []);
  } finally {
    await context.close();
  }

  // The same URL on a phone: the table stacks, nothing is wider than the screen.
  const phone = await newPage(env.chrome.browser, 'phone', env.server.url);
  try {
    await phone.page.goto(`/calculator/?model=${encodeURIComponent(MODEL)}&workload=lora&plan_tokens=300000000&plan_epochs=2`);
    await phone.page.waitForSelector('#plan-verdict');
    assert.equal(await phone.page.locator('#plan-epochs').inputValue(), '2');
    assert.equal(await phone.page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth), true, 'nothing wider than the phone');
    await screenshot(phone.page, 'calculator-plan-phone');
    assert.deepEqual(unexpected(phone.problems), []);
  } finally {
    await phone.context.close();
  }
});

// The layout column's text of every row, in order.
async function layoutCells(page) {
  return page.locator('#plan-results tbody td[data-label^="Layout"] .layout-name').allInnerTexts();
}

test('serving with an engine and a layout: tp 2 on every option, the largest batch that fits, decode only, all in the URL', async () => {
  const MODEL_70B = 'meta-llama/Llama-3.1-70B';
  const { context, page, problems } = await newPage(env.chrome.browser, 'desktop', env.server.url);
  const bodies = recordPlanBodies(page);
  const fits = recordBodies(page, '/v1/fit');
  const sizes = recordBodies(page, '/v1/size');
  try {
    await page.goto(`/calculator/?model=${encodeURIComponent(MODEL_70B)}&workload=infer`);
    await expectPlan(page, bodies, (b) => assert.equal(b.workload, 'infer'));
    // vLLM, and tensor parallel over 2 cards from the Advanced disclosure.
    await page.selectOption('#engine', 'vllm');
    await page.click('#advanced summary');
    assert.equal(await page.locator('#cp').isVisible(), false, 'context parallel is for training');
    assert.equal(await page.locator('#vp').isVisible(), false, 'virtual stages are for training');
    await page.fill('#tp', '2');
    const tp2 = await expectPlan(page, bodies, (b) => {
      assert.equal(b.engine, 'vllm');
      assert.equal(b.tp, 2);
      assert.equal(b.gpus, undefined, 'the plan counts the cards of the layout itself');
    });
    assert.ok(tp2.options.length > 0);
    for (const o of tp2.options) assert.equal(o.layout.name, 'tp 2', `${o.configuration}: ${o.layout.name}`);
    assert.deepEqual(await layoutCells(page), tp2.options.map((o) => o.layout.name));
    assert.match(await page.locator('#plan-verdict').innerText(), /\(tp 2\)/);
    // The size is that layout's (two cards); fit, which picks its own layout, never gets one.
    assert.equal(sizes.at(-1).tp, 2);
    assert.equal(sizes.at(-1).gpus, 2);
    assert.equal(sizes.at(-1).engine, 'vllm');
    assert.equal(fits.at(-1).engine, 'vllm');
    for (const name of ['tp', 'pp', 'cp', 'dp', 'vp', 'gpus']) assert.equal(fits.at(-1)[name], undefined, `fit gets no ${name}`);
    assert.match(await page.locator('#results').innerText(), /vLLM · tp 2/);

    // Decode only: 0 prompt tokens are a valid request.
    await page.fill('#plan-prompt_tokens', '0');
    const decode = await expectPlan(page, bodies, (b) => assert.equal(b.prompt_tokens, 0));
    assert.equal(decode.job.prompt_tokens, 0);
    assert.equal(await page.locator('#plan-prompt_tokens').getAttribute('aria-invalid'), null);

    // The largest batch that fits: each option's batch, as the API found it, beside its layout.
    assert.equal(await page.locator('[data-testid="plan-batch"]').count(), 0, 'no batch column for a given batch');
    await page.check('input[name="batch_mode"][value="max"]');
    const max = await expectPlan(page, bodies, (b) => assert.equal(b.batch, 'max'));
    assert.equal(await page.locator('#plan-batch').isVisible(), false, 'no number with "largest that fits"');
    const shown = await page.locator('[data-testid="plan-batch"]').allInnerTexts();
    assert.deepEqual(shown.slice(0, max.options.length), max.options.map((o) => `batch ${o.batch.toLocaleString('en-US')}`));
    assert.ok(max.options.every((o) => o.batch > 1), max.options.map((o) => o.batch).join(' '));
    assert.match(await page.locator('#plan-verdict').innerText(), new RegExp(`\\(tp 2, batch ${max.cheapest.batch}\\)`));
    assert.equal(sizes.at(-1).batch, 1, 'size and fit keep the calculator\'s batch');
    await noSeriousViolations(page, 'calculator serving plan');
    await screenshot(page, 'calculator-plan-serving-desktop');

    // The URL carries every new input: a fresh page (a phone) from it shows the same values and asks
    // the same plan.
    const url = page.url();
    assert.match(url, /[?&]engine=vllm(&|$)/);
    assert.match(url, /[?&]tp=2(&|$)/);
    assert.match(url, /[?&]plan_batch=max(&|$)/);
    assert.match(url, /[?&]plan_prompt_tokens=0(&|$)/);
    const phone = await newPage(env.chrome.browser, 'phone', env.server.url);
    const phoneBodies = recordPlanBodies(phone.page);
    try {
      await phone.page.goto(url);
      await expectPlan(phone.page, phoneBodies, (b) => {
        assert.equal(b.engine, 'vllm');
        assert.equal(b.tp, 2);
        assert.equal(b.batch, 'max');
        assert.equal(b.prompt_tokens, 0);
      });
      assert.equal(await phone.page.locator('#engine').inputValue(), 'vllm');
      assert.equal(await phone.page.locator('#tp').inputValue(), '2');
      assert.equal(await phone.page.locator('#advanced').evaluate((d) => d.open), true);
      assert.equal(await phone.page.locator('input[name="batch_mode"][value="max"]').isChecked(), true);
      assert.equal(await phone.page.locator('#plan-prompt_tokens').inputValue(), '0');
      assert.equal(await phone.page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth), true, 'nothing wider than the phone');
      await noSeriousViolations(phone.page, 'calculator serving plan (phone)');
      await screenshot(phone.page, 'calculator-plan-serving-phone');
      assert.deepEqual(unexpected(phone.problems), []);
    } finally {
      await phone.context.close();
    }

    // A number again: the plan's own batch goes to the plan only.
    await page.check('input[name="batch_mode"][value="number"]');
    await page.fill('#plan-batch', '8');
    await expectPlan(page, bodies, (b) => assert.equal(b.batch, 8));
    assert.match(page.url(), /[?&]plan_batch=8(&|$)/);
    assert.deepEqual(unexpected(problems), []);
  } finally {
    await context.close();
  }
});

test('a job no node holds: the plan names its nodes and links each multi-node option to a quote request', async () => {
  const { context, page, problems } = await newPage(env.chrome.browser, 'desktop', env.server.url);
  const bodies = recordPlanBodies(page);
  try {
    await page.goto('/calculator/?model=405b&workload=full&plan_tokens=200000000');
    const plan = await expectPlan(page, bodies, (b) => {
      assert.equal(b.model, '405b');
      assert.equal(b.tokens, 200000000);
    });
    const c = plan.cheapest;
    assert.equal(c.quote.needed, true);
    assert.ok(c.quote.nodes > 1);
    const verdict = await page.locator('#plan-verdict').innerText();
    assert.ok(verdict.includes(`${c.quote.nodes} nodes of ${c.quote.gpus_per_node}× ${c.gpu} — request a quote`), verdict);
    assert.ok(verdict.includes(`(${c.layout.name})`), verdict);
    // Every multi-node row: a quote link with the job, no Rent or Buy spot (whole sets are not rented).
    const rows = page.locator('#plan-results tbody tr');
    for (let i = 0; i < plan.options.length; i++) {
      const o = plan.options[i];
      const row = rows.nth(i);
      if (!o.quote.needed) continue;
      assert.match(await row.locator('th').innerText(), new RegExp(`\\(${o.quote.nodes} nodes\\)`));
      assert.equal(await row.locator('.action-rent, .action-spot').count(), 0);
      const href = await row.locator('[data-testid="plan-quote-link"]').getAttribute('href');
      const q = new URLSearchParams(href.split('?')[1]);
      assert.equal(href.split('?')[0], '/quote/');
      assert.equal(q.get('model'), '405b');
      assert.equal(q.get('workload'), 'full');
      assert.equal(q.get('tokens'), '200000000');
      assert.equal(await row.locator('td[data-label="Layout"] .layout-name').innerText(), o.layout.name);
    }
    assert.match(await page.locator('#plan-results').innerText(), /Beyond one node of 8 cards a set is a quote request/);
    assert.equal(await page.locator('[data-testid="plan-verdict-action"]').getAttribute('href'), await rows.first().locator('[data-testid="plan-quote-link"]').getAttribute('href'));
    await noSeriousViolations(page, 'calculator multi-node plan');
    await screenshot(page, 'calculator-plan-quote-desktop');

    // The link opens the quote form with the job filled in.
    await page.locator('[data-testid="plan-verdict-action"]').click();
    await page.waitForURL('**/quote/**');
    assert.equal(await page.inputValue('#q-model'), '405b');
    assert.equal(await page.inputValue('#q-workload'), 'full');
    assert.equal(await page.inputValue('#q-tokens'), '200000000');
    assert.deepEqual(unexpected(problems), []);
  } finally {
    await context.close();
  }
});

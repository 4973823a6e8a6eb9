// The calculator's "Advanced (detailed profile)" switches, in a real browser against a real server:
//  - for a real model (meta-llama/Llama-3.1-8B) LoRA shows the training switches; recompute none
//    (gradient checkpointing off, with the keyboard) raises the total; an old link's
//    gradient_checkpointing=0 opens as recompute none; gradient accumulation on a full
//    fine-tune raises the gradients;
//  - the page sends only the values that differ from the defaults (the default request is exactly
//    the one without the disclosure), and the URL carries them: a fresh page from it shows the same
//    total with the disclosure open;
//  - a preset hides the switches (a hint says why) and sends none of them;
//  - an API error about a switch is shown beside it;
//  - FP4 weights, an engine (inference), FP8 training and a layout (tp, pp, vp) go to size and fit
//    where they apply (a layout never to fit), refusals land on their field (a plan's on the
//    calculator's GPUs), and the URL brings every one back.
// Every expected figure is asked of the API with the body the page sent, never written here.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isDeepStrictEqual } from 'node:util';
import { newPage, screenshot } from './lib/browser.mjs';
import { recordBodies, unexpected, useServerAndBrowser } from './lib/helpers.mjs';
import { noSeriousViolations } from './lib/axe.mjs';
import { decimal, componentLabel } from '../../web/assets/format.js';

const env = useServerAndBrowser();
const MODEL = 'meta-llama/Llama-3.1-8B';
const ADVANCED = [
  'optimizer',
  'lora_targets',
  'grad_accum',
  'prefill_chunk',
  'recompute',
  'flash_attention',
  'pure_bf16',
  'chunked_loss',
  'fused_kernels',
  'offload_optimizer',
  'optimizer_in_backward',
  'old_transformers',
];
const TRAINING_SWITCHES = ADVANCED.filter((n) => n !== 'prefill_chunk' && n !== 'lora_targets' && n !== 'optimizer_in_backward');
const INFERENCE_SWITCHES = ['prefill_chunk', 'old_transformers'];

// The bodies of the page's POST /v1/size requests, in order.
function recordSizeBodies(page) {
  return recordBodies(page, '/v1/size');
}

// Asks the API for `body`, waits until the page shows that answer's total, and checks that the
// page's last size request was exactly `body`. Returns the API's answer.
async function expectResult(page, bodies, body) {
  // The page asks 250 ms after a change (later on a loaded machine); a change that leaves the total
  // as it was (an engine for a preset) must not be read from the previous answer.
  const deadline = Date.now() + 30000;
  while (!isDeepStrictEqual(bodies.at(-1), body) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  const size = await env.api.call('POST', '/v1/size', body);
  const total = decimal(size.card_gb, 0) + ' GB';
  await page.waitForFunction(
    (want) => document.querySelector('#total')?.textContent === want && !document.querySelector('#results').hasAttribute('aria-busy'),
    total
  );
  assert.deepEqual(bodies.at(-1), body, 'the page sent exactly this body');
  assert.match(await page.locator('.result-total .exact').innerText(), new RegExp('^' + decimal(size.card_gb, 2).replace('.', '\\.') + ' GB'));
  return size;
}

function gb(size, name) {
  const c = size.components.find((x) => x.name === name);
  assert.ok(c, `component ${name} in the answer`);
  return c.gb;
}

async function visible(page, name) {
  return page.locator(`[data-adv="${name}"]`).isVisible();
}

test('the calculator: detailed switches for a real model change the answer, live in the URL, and hide for a preset', async () => {
  const { context, page, problems } = await newPage(env.chrome.browser, 'desktop', env.server.url);
  const bodies = recordSizeBodies(page);
  try {
    await page.goto('/calculator/');
    await page.waitForSelector('#total');
    // Presets: the disclosure holds only the hint.
    await page.click('#advanced summary');
    assert.equal(await page.locator('#adv-hint').isVisible(), true);
    assert.equal(await page.locator('#adv-body').isVisible(), false);

    // Llama-3.1-8B LoRA with every default: the request has no advanced field at all.
    await page.selectOption('#precision', 'bf16');
    await page.check('input[name="source"][value="bundled"]');
    await page.selectOption('#m-bundled', MODEL);
    await page.selectOption('#workload', 'lora');
    const loraBody = { model: MODEL, workload: 'lora', precision: 'bf16', seq: 2048, rank: 16, batch: 1, explain: true };
    const lora = await expectResult(page, bodies, loraBody);
    assert.equal(await page.locator('#adv-hint').isVisible(), false);
    for (const name of [...TRAINING_SWITCHES, 'lora_targets']) assert.equal(await visible(page, name), true, `${name} shown for LoRA`);
    assert.equal(await visible(page, 'prefill_chunk'), false, 'prefill_chunk is for inference');
    assert.equal(await visible(page, 'optimizer_in_backward'), false, 'the step in backward is for full fine-tuning');
    assert.equal(await page.locator('#adv-count').innerText(), '');
    for (const name of ADVANCED) assert.doesNotMatch(page.url(), new RegExp(`[?&]${name}=`));

    // Recompute none (gradient checkpointing off), with the keyboard: more activations, a larger
    // total. Only `recompute` is sent: never `gradient_checkpointing` beside it.
    await page.focus('#recompute');
    await page.keyboard.press('End');
    const noCkpt = await expectResult(page, bodies, { ...loraBody, recompute: 'none' });
    assert.ok(noCkpt.card_gb > lora.card_gb, `${noCkpt.card_gb} GB without checkpointing > ${lora.card_gb} GB with it`);
    assert.ok(gb(noCkpt, 'activations') > gb(lora, 'activations'));
    assert.match(page.url(), /[?&]recompute=none(&|$)/);
    assert.doesNotMatch(page.url(), /gradient_checkpointing/);
    assert.match(await page.locator('#adv-count').innerText(), /1 changed/);
    assert.match(await page.locator('#results').innerText(), /no checkpointing/, 'the result names the switch the API applied');

    // The link reproduces it in a fresh page (phone-sized): same total, the disclosure open, the box unticked.
    const ckptUrl = page.url();
    {
      const fresh = await newPage(env.chrome.browser, 'phone', env.server.url);
      try {
        await fresh.page.goto(ckptUrl);
        await fresh.page.waitForFunction((want) => document.querySelector('#total')?.textContent === want, decimal(noCkpt.card_gb, 0) + ' GB');
        assert.equal(await fresh.page.locator('#advanced').evaluate((d) => d.open), true);
        assert.equal(await fresh.page.locator('#recompute').inputValue(), 'none');
        assert.equal(await fresh.page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth), true, 'nothing wider than the phone');
        await screenshot(fresh.page, 'calculator-advanced-phone');
        assert.deepEqual(unexpected(fresh.problems), []);
      } finally {
        await fresh.context.close();
      }
    }

    // A link from before the Recompute select (gradient_checkpointing=0) opens as recompute none,
    // the same request.
    {
      const old = await context.newPage();
      const oldBodies = recordSizeBodies(old);
      await old.goto(ckptUrl.replace('recompute=none', 'gradient_checkpointing=0'));
      await expectResult(old, oldBodies, { ...loraBody, recompute: 'none' });
      assert.equal(await old.locator('#recompute').inputValue(), 'none');
      await old.close();
    }

    // Full fine-tune, full recompute back (the default again, so not sent): then 4 micro-batches
    // per step keep every gradient allocated.
    await page.selectOption('#recompute', 'full');
    await page.selectOption('#workload', 'full');
    const fullBody = { model: MODEL, workload: 'full', precision: 'bf16', seq: 2048, batch: 1, explain: true };
    const full = await expectResult(page, bodies, fullBody);
    assert.equal(await visible(page, 'lora_targets'), false, 'no adapters in a full fine-tune');
    assert.equal(await visible(page, 'optimizer_in_backward'), true);
    assert.doesNotMatch(page.url(), /recompute/);
    await page.fill('#grad_accum', '4');
    const accum = await expectResult(page, bodies, { ...fullBody, grad_accum: 4 });
    assert.ok(gb(accum, 'gradients') > gb(full, 'gradients'), `gradients ${gb(accum, 'gradients')} GB > ${gb(full, 'gradients')} GB`);
    const legend = page.locator('.legend li', { hasText: componentLabel('gradients') });
    assert.match(await legend.innerText(), new RegExp(decimal(gb(accum, 'gradients'), 2).replace('.', '\\.') + ' GB'));
    assert.match(page.url(), /[?&]grad_accum=4(&|$)/);
    assert.match(await page.locator('#results').innerText(), /4 micro-batches per step/);
    await screenshot(page, 'calculator-advanced-desktop');

    const accumUrl = page.url();
    const second = await context.newPage();
    const secondBodies = recordSizeBodies(second);
    await second.goto(accumUrl);
    await expectResult(second, secondBodies, { ...fullBody, grad_accum: 4 });
    assert.equal(await second.locator('#grad_accum').inputValue(), '4');
    assert.equal(await second.locator('#advanced').evaluate((d) => d.open), true);
    await second.close();

    // A preset: the switches are hidden and disabled, none is sent or written to the URL (the
    // field keeps its 4 for when a real model comes back).
    await page.check('input[name="source"][value="preset"]');
    await expectResult(page, bodies, { model: '70b', workload: 'full', precision: 'bf16', seq: 2048, batch: 1, explain: true });
    assert.equal(await page.locator('#adv-hint').isVisible(), true);
    assert.match(await page.locator('#adv-hint').innerText(), /guide's published rules/);
    for (const name of ADVANCED) {
      assert.equal(await visible(page, name), false, `${name} hidden for a preset`);
      assert.equal(await page.locator(`[name="${name}"]`).isDisabled(), true);
      assert.doesNotMatch(page.url(), new RegExp(`[?&]${name}=`));
    }
    assert.equal(await page.locator('#grad_accum').inputValue(), '4');

    // Inference with a real model: only the prefill chunk; a refused one is shown beside it.
    await page.check('input[name="source"][value="bundled"]');
    await page.selectOption('#workload', 'infer');
    const inferBody = { model: MODEL, workload: 'infer', precision: 'bf16', kv_precision: 'fp16', context: 8192, batch: 1, explain: true };
    await expectResult(page, bodies, inferBody);
    for (const name of ADVANCED) assert.equal(await visible(page, name), INFERENCE_SWITCHES.includes(name), `${name} for inference`);
    await page.fill('#prefill_chunk', '512');
    const chunked = await expectResult(page, bodies, { ...inferBody, prefill_chunk: 512 });
    assert.ok(gb(chunked, 'prefill_activations') > 0);
    // Transformers before 4.45: every position of the 512-token step gets bf16 + fp32 logits
    // (512 x 128,256 x 6 B) and each layer its rotary tables.
    await page.check('#old_transformers');
    const old = await expectResult(page, bodies, { ...inferBody, prefill_chunk: 512, old_transformers: true });
    assert.ok(gb(old, 'prefill_activations') > gb(chunked, 'prefill_activations'));
    assert.ok(gb(old, 'rotary_caches') > 0);
    assert.match(page.url(), /[?&]old_transformers=1(&|$)/);
    assert.match(await page.locator('#results').innerText(), /transformers before 4\.45/);
    await page.uncheck('#old_transformers');
    await expectResult(page, bodies, { ...inferBody, prefill_chunk: 512 });
    await page.fill('#prefill_chunk', '0');
    await page.waitForFunction(() => document.querySelector('#err-prefill_chunk')?.textContent.length > 0);
    const refused = await fetch(env.server.url + '/v1/size', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ ...inferBody, prefill_chunk: 0 }),
    }).then((r) => r.json());
    assert.equal(refused.error.field, 'prefill_chunk');
    // The API's rule as a sentence about the field (errors.js): its label, separators, a period.
    assert.match(refused.error.message, /^--prefill-chunk must be between 1 and 10000000 tokens per prefill step, got 0$/);
    assert.equal(await page.locator('#err-prefill_chunk').innerText(), 'Prefill chunk must be between 1 and 10,000,000 tokens per prefill step, got 0.');
    assert.equal(await page.locator('#prefill_chunk').getAttribute('aria-invalid'), 'true');
    assert.equal(await page.evaluate(() => document.activeElement?.id), 'prefill_chunk');
    assert.deepEqual(unexpected(problems, ['/v1/size', '/v1/fit', 'status of 400']), []);
  } finally {
    await context.close();
  }
});

// Waits until the page has shown the answer to its latest size and fit.
async function settled(page) {
  await page.waitForFunction(() => !document.querySelector('#results').hasAttribute('aria-busy') && document.querySelector('#verdict, #results .empty'));
  await page.waitForTimeout(300);
  await page.waitForFunction(() => !document.querySelector('#results').hasAttribute('aria-busy'));
}

test('the calculator: FP4 weights, an engine, FP8 training and a layout are sent where they apply, and refused on their field', async () => {
  const { context, page, problems } = await newPage(env.chrome.browser, 'desktop', env.server.url);
  const sizes = recordSizeBodies(page);
  const fits = recordBodies(page, '/v1/fit');
  try {
    // FP4 weights: only Blackwell holds them; the verdict is the API's cheapest.
    await page.goto('/calculator/?model=70b&workload=infer&precision=fp4');
    const fp4 = await expectResult(page, sizes, { model: '70b', workload: 'infer', precision: 'fp4', kv_precision: 'fp16', context: 8192, batch: 1, explain: true });
    assert.ok(fp4.card_gb > 0);
    await settled(page);
    const fp4Fit = await env.api.call('POST', '/v1/fit', { ...fits.at(-1) });
    assert.match(await page.locator('#verdict').innerText(), new RegExp(fp4Fit.best.gpu));
    assert.equal(await page.locator('#precision').inputValue(), 'fp4');

    // An engine for inference: sent to size and fit, named in the result; hidden and not sent for training.
    await page.selectOption('#engine', 'sglang');
    await expectResult(page, sizes, { model: '70b', workload: 'infer', precision: 'fp4', kv_precision: 'fp16', engine: 'sglang', context: 8192, batch: 1, explain: true });
    await settled(page);
    assert.equal(fits.at(-1).engine, 'sglang');
    assert.match(await page.locator('#results').innerText(), /SGLang/);
    assert.match(page.url(), /[?&]engine=sglang(&|$)/);

    // A real model, LoRA with FP8 training: the cheapest card changes from an Ampere card (no FP8
    // tensor cores) to one with FP8; both figures asked of the API.
    await page.selectOption('#precision', 'bf16');
    await page.check('input[name="source"][value="bundled"]');
    await page.selectOption('#m-bundled', MODEL);
    await page.selectOption('#workload', 'lora');
    const loraBody = { model: MODEL, workload: 'lora', precision: 'bf16', seq: 2048, rank: 16, batch: 1, explain: true };
    await expectResult(page, sizes, loraBody);
    assert.equal(await page.locator('#engine').isVisible(), false);
    await settled(page);
    assert.equal(fits.at(-1).engine, undefined, 'no engine for training');
    const plain = await env.api.call('POST', '/v1/fit', fits.at(-1));
    await page.click('#advanced summary');
    await page.check('#fp8_training');
    await expectResult(page, sizes, { ...loraBody, fp8_training: true });
    await settled(page);
    assert.equal(fits.at(-1).fp8_training, true);
    const fp8 = await env.api.call('POST', '/v1/fit', fits.at(-1));
    assert.notEqual(fp8.best.gpu, plain.best.gpu, 'FP8 training moves the cheapest card');
    assert.match(await page.locator('#verdict').innerText(), new RegExp(fp8.best.gpu));
    assert.match(await page.locator('#results').innerText(), /FP8 training/);
    assert.match(page.url(), /[?&]fp8_training=1(&|$)/);

    // Under a budget only cards without FP8 meet: the API's reason, no configuration.
    await page.click('#filters summary');
    await page.fill('#max_monthly_usd', '200');
    await page.locator('#max_monthly_usd').press('Enter');
    await page.waitForFunction(() => /over the \$200\.00 budget/.test(document.querySelector('#results')?.innerText || ''));
    await page.fill('#max_monthly_usd', '');
    await page.locator('#max_monthly_usd').press('Enter');
    await settled(page);

    // A full fine-tune in FP32 with FP8 training: the API's refusal beside the FP8 box.
    await page.selectOption('#workload', 'full');
    await page.selectOption('#precision', 'fp32');
    await page.waitForFunction(() => document.querySelector('#err-fp8_training')?.textContent.length > 0);
    const refused = await fetch(env.server.url + '/v1/size', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(sizes.at(-1)),
    }).then((r) => r.json());
    assert.equal(refused.error.field, 'fp8_training');
    assert.match(await page.locator('#err-fp8_training').innerText(), /FP8 training keeps bf16 weights beside its FP8 matmuls/);
    assert.equal(await page.locator('#fp8_training').getAttribute('aria-invalid'), 'true');
    assert.equal(await page.evaluate(() => document.activeElement?.id), 'fp8_training');
    await page.selectOption('#precision', 'bf16');
    const fullBody = { model: MODEL, workload: 'full', precision: 'bf16', seq: 2048, batch: 1, fp8_training: true, explain: true };
    await expectResult(page, sizes, fullBody);

    // A layout: tp 2 x pp 2 sizes 4 cards (GPUs left at 1); fit never gets it; selective recompute.
    assert.equal(await page.locator('#cp').isVisible(), true, 'context parallel for training');
    await page.fill('#tp', '2');
    await page.fill('#pp', '2');
    await page.selectOption('#recompute', 'selective');
    const layout = await expectResult(page, sizes, { ...fullBody, recompute: 'selective', gpus: 4, tp: 2, pp: 2, zero: 3 });
    assert.equal(layout.gpus, 4);
    await settled(page);
    for (const name of ['tp', 'pp', 'gpus', 'zero']) assert.equal(fits.at(-1)[name], undefined, `fit gets no ${name}`);
    assert.equal(fits.at(-1).recompute, 'selective');
    assert.equal(fits.at(-1).gradient_checkpointing, undefined, 'never both recompute and gradient_checkpointing');
    assert.match(await page.locator('#results').innerText(), /tp 2 x pp 2/);
    assert.match(await page.locator('#fit-layout-note').innerText(), /the plan below keep tp 2 x pp 2/);
    assert.match(await page.locator('#results').innerText(), /selective recompute/);
    assert.match(await page.locator('#adv-count').innerText(), /4 changed/);

    // Virtual stages without pipeline stages: the refused degree is shown beside it (the API's field).
    await page.fill('#pp', '');
    await page.fill('#vp', '2');
    await page.waitForFunction(() => document.querySelector('#err-vp')?.textContent.length > 0);
    assert.match(await page.locator('#err-vp').innerText(), /virtual pipeline stages interleave pipeline stages/i);
    assert.equal(await page.locator('#vp').getAttribute('aria-invalid'), 'true');
    await page.fill('#vp', '');

    // 12 GPUs with tp 2 size fine, but the plan wants whole nodes above 8: its refusal is shown
    // beside the calculator's GPUs field.
    await page.fill('#gpus', '12');
    await page.waitForFunction(() => document.querySelector('#err-gpus')?.textContent.length > 0);
    assert.match(await page.locator('#err-gpus').innerText(), /whole nodes of 8/);
    assert.match(await page.locator('#plan-results').innerText(), /Fix the highlighted field of the calculator above/);
    assert.equal(sizes.at(-1).gpus, 12);

    // The URL reproduces the form in a fresh page: every new input has its value back.
    await page.fill('#gpus', '4');
    await expectResult(page, sizes, { ...fullBody, recompute: 'selective', gpus: 4, tp: 2, zero: 3 });
    const url = page.url();
    const fresh = await context.newPage();
    const freshSizes = recordSizeBodies(fresh);
    await fresh.goto(url);
    await expectResult(fresh, freshSizes, { ...fullBody, recompute: 'selective', gpus: 4, tp: 2, zero: 3 });
    assert.equal(await fresh.locator('#tp').inputValue(), '2');
    assert.equal(await fresh.locator('#pp').inputValue(), '');
    assert.equal(await fresh.locator('#gpus').inputValue(), '4');
    assert.equal(await fresh.locator('#recompute').inputValue(), 'selective');
    assert.equal(await fresh.locator('#fp8_training').isChecked(), true);
    assert.equal(await fresh.locator('#advanced').evaluate((d) => d.open), true);
    await noSeriousViolations(fresh, 'calculator with a layout');
    await fresh.close();
    assert.deepEqual(unexpected(problems, ['/v1/size', '/v1/fit', '/v1/plan', 'status of 400']), []);
  } finally {
    await context.close();
  }
});

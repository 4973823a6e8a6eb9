// VRAM calculator: the form's state lives in the URL; POST /v1/size gives the memory by component
// and POST /v1/fit the cheapest configurations of the fleet (both with explain). The page only
// lays out what the API answers.
import { api } from './api.js';
import { h, $, $$, replace, table, showFormError, clearFormErrors, errorBox } from './dom.js';
import { usd, decimal, integer, componentLabel, WORKLOAD_LABEL } from './format.js';
import { planFor } from './plan.js';
import { actionLinks, loadSpotNames, quoteHref, rentHref } from './actions.js';

const form = $('#calc');
const results = $('#results');
let spotNames = new Map();  // term card -> spot market (actions.js)
const MODEL_CONTROLS = {
  preset: { el: $('#m-preset'), field: 'model' },
  bundled: { el: $('#m-bundled'), field: 'model' },
  config: { el: $('#m-config'), field: 'config' },
};
// Which workloads each optional field applies to (the API refuses a field that does not apply).
const APPLIES = {
  precision: ['infer', 'full', 'lora'],
  kv_precision: ['infer'],
  engine: ['infer'],
  context: ['infer'],
  seq: ['full', 'lora', 'qlora'],
  rank: ['lora', 'qlora'],
  zero: ['full'],
};
const TRAINING = ['lora', 'qlora', 'full'];
const ALL = ['infer', ...TRAINING];
// How the cards share the job (the "Parallelism" group): each degree for the workloads it applies
// to (context parallel and virtual stages split a training step). Sent to size and plan, never to
// fit (it picks its own layout); empty: the plan searches it.
const LAYOUT = { tp: ALL, pp: ALL, cp: TRAINING, dp: ALL, vp: TRAINING };
const RECOMPUTE_LABEL = { selective: 'selective recompute', none: 'no checkpointing' };
// The detailed profile's switches (docs/sizing-model.md §3), in the "Advanced" disclosure: shown for
// a real model or a pasted config only (the API refuses them for the guide's presets; `anyProfile`:
// also for a preset), each for the workloads it applies to, and sent (and written to the URL) only
// when it differs from its default, so that a request without them is exactly the default one.
// Recompute is the one control for activation checkpointing: the API's `gradient_checkpointing`
// is never sent beside it (full = checkpointing, none = without; request.cc refuses a contradiction).
const OPTIMIZER_LABEL = { adamw: 'AdamW', adam8bit: '8-bit Adam', sgd: 'SGD', adafactor: 'Adafactor' };
const ADVANCED = {
  optimizer: { workloads: TRAINING, def: 'adamw', describe: (v) => OPTIMIZER_LABEL[v] || v },
  lora_targets: { workloads: ['lora', 'qlora'], def: 'qv', describe: (v) => `adapters on ${v}` },
  grad_accum: { workloads: TRAINING, def: '1', number: true, describe: (v) => `${integer(v)} micro-batches per step` },
  prefill_chunk: { workloads: ['infer'], def: '', number: true, describe: (v) => `prefill in chunks of ${integer(v)}` },
  recompute: { workloads: TRAINING, def: 'full', describe: (v) => RECOMPUTE_LABEL[v] || `recompute ${v}` },
  fp8_training: { workloads: TRAINING, def: false, anyProfile: true, describe: () => 'FP8 training' },
  flash_attention: { workloads: TRAINING, def: true, describe: () => 'eager attention' },
  pure_bf16: { workloads: TRAINING, def: false, describe: () => 'pure BF16' },
  chunked_loss: { workloads: TRAINING, def: false, describe: () => 'chunked loss' },
  fused_kernels: { workloads: TRAINING, def: false, describe: () => 'fused kernels' },
  offload_optimizer: { workloads: TRAINING, def: false, describe: () => 'optimizer offloaded' },
  optimizer_in_backward: { workloads: ['full'], def: false, describe: () => 'optimizer step in backward' },
  old_transformers: { workloads: ALL, def: false, describe: () => 'transformers before 4.45' },
};
const ENGINE_LABEL = { vllm: 'vLLM', sglang: 'SGLang', 'tensorrt-llm': 'TensorRT-LLM', 'llama.cpp': 'llama.cpp', transformers: 'Transformers' };
const MAX_URL_CONFIG_CHARS = 6000;
const TOP = 8;

let run = 0;
let bundledModels = null;
let pendingBundled = null;

function source() {
  return form.querySelector('input[name="source"]:checked').value;
}

function setSource(value) {
  const radio = form.querySelector(`input[name="source"][value="${CSS.escape(value)}"]`);
  if (radio) radio.checked = true;
}

function syncVisibility() {
  const src = source();
  for (const [key, { el, field }] of Object.entries(MODEL_CONTROLS)) {
    const on = key === src;
    el.closest('[data-source]').hidden = !on;
    el.disabled = !on;
    if (on) el.name = field;
    else el.removeAttribute('name');
  }
  const w = form.elements.workload.value;
  // The degrees first: the ZeRO stage shows when the size spreads over several cards.
  for (const [name, workloads] of Object.entries(LAYOUT)) {
    const on = workloads.includes(w);
    form.querySelector(`[data-layout="${name}"]`).hidden = !on;
    form.elements[name].disabled = !on;
  }
  for (const [name, workloads] of Object.entries(APPLIES)) {
    const on = workloads.includes(w) && (name !== 'zero' || sizeGpus(layoutValues()) > 1);
    const wrap = form.querySelector(`[data-for="${name}"]`);
    wrap.hidden = !on;
    form.elements[name].disabled = !on;
  }
  const detailed = src !== 'preset';
  $('#adv-hint').hidden = detailed;
  $('#adv-hint-infer').hidden = !detailed || w !== 'infer';
  $('#adv-body').hidden = !detailed;
  for (const [name, spec] of Object.entries(ADVANCED)) {
    const on = (detailed || spec.anyProfile) && spec.workloads.includes(w);
    form.querySelector(`[data-adv="${name}"]`).hidden = !on;
    form.elements[name].disabled = !on;
  }
  const changed = Object.keys(advancedValues()).length + Object.keys(layoutValues()).length;
  $('#adv-count').textContent = changed ? ` · ${changed} changed` : '';
}

// The advanced switches that apply now and differ from their defaults, as the API wants them
// (numbers as numbers, switches as booleans).
function advancedValues() {
  const out = {};
  for (const [name, spec] of Object.entries(ADVANCED)) {
    const el = form.elements[name];
    if (el.disabled) continue;
    if (el.type === 'checkbox') {
      if (el.checked !== spec.def) out[name] = el.checked;
    } else {
      const v = el.value.trim();
      if (v !== spec.def && v !== '') out[name] = spec.number ? numberOrText(v) : v;
    }
  }
  return out;
}

// The parallelism degrees given (enabled and not empty), as numbers where they are numbers.
function layoutValues() {
  const out = {};
  for (const name of Object.keys(LAYOUT)) {
    const el = form.elements[name];
    const v = el.value.trim();
    if (!el.disabled && v !== '') out[name] = numberOrText(v);
  }
  return out;
}

// The GPUs the size is asked for: the GPUs field, or, left at 1 with a layout given, the cards that
// layout uses (tp x pp x cp x dp), so that "tp 2" alone sizes two cards rather than a contradiction.
function sizeGpus(layout) {
  const typed = form.elements.gpus.value.trim();
  if (typed !== '' && typed !== '1') return numberOrText(typed);
  let product = 1;
  for (const name of ['tp', 'pp', 'cp', 'dp']) {
    if (typeof layout[name] === 'number') product *= layout[name];
  }
  return product;
}

function numberOrText(value) {
  const t = String(value).trim();
  return /^\d{1,15}$/.test(t) ? Number(t) : t;
}

// The request body shared by size and fit; null (with the error shown) when the page can already
// tell the input is unusable (a pasted config that is not JSON).
function sharedFields() {
  const body = {};
  const src = source();
  if (src === 'config') {
    const text = MODEL_CONTROLS.config.el.value.trim();
    if (!text) {
      showFormError(form, { field: 'config', message: 'Paste the model\'s config.json here.' });
      return null;
    }
    try {
      body.config = JSON.parse(text);
    } catch (e) {
      showFormError(form, { field: 'config', message: 'This is not valid JSON: ' + e.message });
      return null;
    }
  } else {
    const v = MODEL_CONTROLS[src].el.value;
    if (!v) {
      showFormError(form, { field: 'model', message: 'Pick a model.' });
      return null;
    }
    body.model = v;
  }
  body.workload = form.elements.workload.value;
  for (const name of ['precision', 'kv_precision']) {
    if (!form.elements[name].disabled) body[name] = form.elements[name].value;
  }
  if (!form.elements.engine.disabled && form.elements.engine.value) body.engine = form.elements.engine.value;
  for (const name of ['context', 'seq', 'rank', 'batch']) {
    const el = form.elements[name];
    if (!el.disabled && el.value.trim() !== '') body[name] = numberOrText(el.value);
  }
  Object.assign(body, advancedValues());
  return body;
}

// The job no node holds, for the quote request form (actions.js quoteHref).
let lastShared = null;
function quoteLink(shared) {
  if (!shared || !shared.model) return null;  // a pasted config: the quote names a model
  return h('a', { href: quoteHref(shared), class: 'btn btn-small', id: 'quote-link', 'data-testid': 'quote-link' }, 'Multi-node: request a quote');
}

function sizeBody(shared) {
  const layout = layoutValues();
  const body = { ...shared, explain: true };
  const gpus = sizeGpus(layout);
  if (gpus !== 1) body.gpus = gpus;
  Object.assign(body, layout);
  if (!form.elements.zero.disabled) body.zero = Number(form.elements.zero.value);
  return body;
}

// The plan's request: fit's (the workload and the filters) with the layout given; the plan searches
// what is not given. A typed GPU count goes with a layout only (alone, the plan searches counts).
function planBody(shared) {
  const { explain, top, ...body } = fitBody(shared);
  const layout = layoutValues();
  Object.assign(body, layout);
  const typed = form.elements.gpus.value.trim();
  if (Object.keys(layout).length && typed !== '' && typed !== '1') body.gpus = numberOrText(typed);
  return body;
}

function fitBody(shared) {
  const body = { ...shared, explain: true, top: TOP };
  if (form.elements.region.value) body.region = form.elements.region.value;
  const budget = form.elements.max_monthly_usd.value.trim();
  if (budget) body.max_monthly_usd = budget;
  if (form.elements.cuda_only.checked) body.cuda_only = true;
  if (form.elements.in_stock.checked) body.in_stock = true;
  return body;
}

// ---------- URL state ----------

// The form's plain fields in the query string under their own names (the advanced switches and the
// layout besides); empty ones are left out.
const URL_FIELDS = ['precision', 'kv_precision', 'engine', 'context', 'seq', 'rank', 'batch', 'gpus', 'zero', 'region', 'max_monthly_usd'];

function writeUrl() {
  const q = new URLSearchParams();
  // The plan section's own parameters (plan.js) stay.
  for (const [key, value] of new URLSearchParams(location.search)) if (key.startsWith('plan_')) q.set(key, value);
  const src = source();
  if (src === 'config') {
    const text = MODEL_CONTROLS.config.el.value.trim();
    if (text.length <= MAX_URL_CONFIG_CHARS) {
      try {
        q.set('config', JSON.stringify(JSON.parse(text)));
      } catch (e) {
        q.set('config', text);
      }
    }
  } else {
    q.set('model', MODEL_CONTROLS[src].el.value);
  }
  q.set('workload', form.elements.workload.value);
  for (const name of [...URL_FIELDS, ...Object.keys(LAYOUT)]) {
    const el = form.elements[name];
    if (el.disabled || String(el.value).trim() === '') continue;
    if (name === 'gpus' && el.value.trim() === '1') continue;
    if (name === 'batch' && el.value.trim() === '1') continue;
    q.set(name, el.value.trim());
  }
  for (const name of ['cuda_only', 'in_stock']) if (form.elements[name].checked) q.set(name, '1');
  for (const [name, value] of Object.entries(advancedValues())) {
    q.set(name, value === true ? '1' : value === false ? '0' : String(value));
  }
  history.replaceState(null, '', '?' + q.toString());
}

function readUrl() {
  const q = new URLSearchParams(location.search);
  if (q.has('config')) {
    setSource('config');
    let text = q.get('config');
    try {
      text = JSON.stringify(JSON.parse(text), null, 2);
    } catch (e) {
      /* keep as typed */
    }
    MODEL_CONTROLS.config.el.value = text;
  } else if (q.has('model')) {
    const m = q.get('model');
    if ([...MODEL_CONTROLS.preset.el.options].some((o) => o.value === m)) {
      setSource('preset');
      MODEL_CONTROLS.preset.el.value = m;
    } else {
      setSource('bundled');
      pendingBundled = m;
      selectBundled(m);
    }
  }
  for (const name of ['workload', ...URL_FIELDS, ...Object.keys(LAYOUT)]) {
    if (q.has(name)) form.elements[name].value = q.get(name);
  }
  if (Object.keys(LAYOUT).some((name) => q.has(name))) $('#advanced').open = true;
  // Links from before the Recompute select: gradient_checkpointing=0 is recompute none.
  if (q.get('gradient_checkpointing') === '0' && !q.has('recompute')) {
    form.elements.recompute.value = 'none';
    $('#advanced').open = true;
  }
  for (const name of ['cuda_only', 'in_stock']) form.elements[name].checked = q.get(name) === '1';
  if (q.has('region') || q.has('max_monthly_usd') || q.has('cuda_only') || q.has('in_stock')) $('#filters').open = true;
  for (const name of Object.keys(ADVANCED)) {
    if (!q.has(name)) continue;
    const el = form.elements[name];
    if (el.type === 'checkbox') el.checked = q.get(name) === '1';
    else el.value = q.get(name);
    $('#advanced').open = true;
  }
}

function selectBundled(id) {
  const select = MODEL_CONTROLS.bundled.el;
  if (!bundledModels) return;
  const match = bundledModels.find((m) => m.id === id || m.id.endsWith('/' + id));
  if (match) {
    select.value = match.id;
  } else {
    // An id the list does not have: keep it selectable so the API can say what is wrong with it.
    select.appendChild(h('option', { value: id }, id));
    select.value = id;
  }
}

// ---------- rendering ----------

function paramsText(n) {
  if (n == null) return '—';
  if (n >= 1e9) return decimal(n / 1e9, n >= 1e11 ? 0 : 1) + 'B';
  return decimal(n / 1e6, 0) + 'M';
}

function modelLine(model, workload) {
  const bits = [
    model.id,
    paramsText(model.total_params) + ' params' + (model.active_params && model.active_params !== model.total_params ? ` (${paramsText(model.active_params)} active)` : ''),
  ];
  if (model.layers) bits.push(`${model.layers} layers`);
  if (model.kv_heads && model.head_dim) bits.push(`${model.kv_heads} KV heads × ${model.head_dim}`);
  const w = [WORKLOAD_LABEL[workload.workload] || workload.workload];
  if (workload.precision) w.push(`${workload.precision.toUpperCase()} weights`);
  if (workload.kv_precision) w.push(`${workload.kv_precision.toUpperCase()} KV`);
  if (workload.context) w.push(`${integer(workload.context)} tokens`);
  if (workload.seq) w.push(`sequence ${integer(workload.seq)}`);
  if (workload.batch && workload.batch !== 1) w.push(`batch ${integer(workload.batch)}`);
  if (workload.engine) w.push(ENGINE_LABEL[workload.engine] || workload.engine);
  const degrees = degreesOf(workload);
  if (degrees.length) w.push(degrees.join(' x ') + (workload.vp > 1 ? ` (${workload.vp} virtual stages)` : ''));
  if (workload.profile) w.push(`${workload.profile} profile`);
  // The detailed switches the API applied that differ from their defaults (its echo of the request).
  for (const [name, spec] of Object.entries(ADVANCED)) {
    const v = workload[name];
    if (v === undefined || v === null || String(v) === String(spec.def)) continue;
    if (name === 'prefill_chunk' && v === 0) continue;  // the API's echo of "the whole prompt"
    w.push(spec.describe(v));
  }
  return h('p', { class: 'muted small' }, bits.join(' · '), h('br'), w.join(' · '));
}

// The degrees above 1 the API echoed, e.g. ["tp 2", "pp 2"].
function degreesOf(workload) {
  return ['tp', 'pp', 'cp', 'dp'].filter((d) => workload[d] > 1).map((d) => `${d} ${workload[d]}`);
}

// With degrees fixed, the memory above is that layout's, but the cheapest configurations are
// fit's: each set is sized in the layout fit picks for it. Said, so that the two are not read as one.
function layoutNote(workload) {
  const degrees = degreesOf(workload);
  if (!degrees.length) return null;
  return h('p', { class: 'muted small', id: 'fit-layout-note', 'data-testid': 'fit-layout-note' },
    `Each set below is sized in the layout that suits it best; the memory above and the plan below keep ${degrees.join(' x ')}.`);
}

function configName(c) {
  return c.count === 1 ? 'one ' + c.gpu : `${c.count}× ${c.gpu}`;
}

function stackBar(components) {
  const bar = h('div', { class: 'stack-bar', role: 'img', 'aria-label': 'Memory by component: ' + components.map((c) => `${componentLabel(c.name)} ${decimal(c.gb, 2)} GB`).join(', ') });
  components.forEach((c, i) => {
    const seg = h('div', { class: `seg c${i % 10}`, title: `${componentLabel(c.name)}: ${decimal(c.gb, 2)} GB` });
    // The segments share the bar in proportion to their bytes: flex does the layout.
    seg.style.flex = `${c.bytes} 0 0`;
    bar.appendChild(seg);
  });
  const legend = h(
    'ul',
    { class: 'legend' },
    components.map((c, i) =>
      h('li', null, h('span', { class: `swatch c${i % 10}`, 'aria-hidden': 'true' }), componentLabel(c.name), h('span', { class: 'val' }, decimal(c.gb, 2) + ' GB'))
    )
  );
  return [bar, legend];
}

function configTable(fit) {
  // Every row carries its action: rent it for a term, or buy its spot hours where it trades.
  const region = form.elements.region.value || undefined;
  const rows = fit.best ? [fit.best, ...fit.alternatives] : [];
  const infer = fit.workload && fit.workload.workload === 'infer';
  const columns = [
    {
      label: 'Configuration',
      th: true,
      // The row's action under its name (a column of its own would push the table past its card).
      cell: (r) => [r.configuration, r.stack === 'ROCm' ? [' ', h('span', { class: 'badge' }, 'ROCm')] : null, h('div', { class: 'row-actions' }, actionLinks({ gpu: r.gpu, count: r.count, region, spot: spotNames.get(r.gpu) }))],
    },
    { label: 'Monthly', num: true, cell: (r) => usd(r.exact.monthly_usd) },
    { label: 'Weekly', num: true, cell: (r) => [usd(r.exact.weekly_usd), r.weekly_derived ? h('span', { title: 'Derived from the fleet\'s weekly/monthly ratio' }, '*') : ''] },
    { label: 'Hourly', num: true, cell: (r) => usd(r.exact.hourly_usd) },
    { label: 'Per card', num: true, cell: (r) => `${decimal(r.per_card_gb, 2)} / ${decimal(r.vram_gb, 0)} GB` },
    {
      label: 'Headroom',
      num: true,
      cell: (r) => [
        r.tight ? [h('span', { class: 'badge badge-warn', title: 'Under 5 GB spare on one card, or under 2 GB per card in a set' }, 'tight'), ' '] : null,
        decimal(r.headroom_gb_per_card, 2) + ' GB',
      ],
    },
  ];
  if (infer) {
    columns.push({ label: 'Decode ceiling', num: true, cell: (r) => (r.decode_ceiling_tok_s == null ? '—' : decimal(r.decode_ceiling_tok_s, 1) + ' tok/s') });
  }
  columns.push({ label: 'Free now', num: true, cell: (r) => integer(r.free_now) });

  const notes = [];
  if (rows.some((r) => r.weekly_derived)) notes.push('* weekly price derived from the fleet\'s weekly/monthly ratio.');
  if (rows.some((r) => r.discount_percent > 0)) notes.push('Sets of cards include the multi-card discount.');
  if (infer) notes.push('Decode ceiling: single-stream tokens/s bound by memory bandwidth / weight bytes read per token — a ceiling, not a benchmark.');
  return [
    table(columns, rows, { rowClass: (r) => (r === fit.best ? 'best' : null) }),
    notes.length ? h('p', { class: 'table-note' }, notes.join(' ')) : null,
  ];
}

function arithmetic(size, fit) {
  const items = [];
  items.push(h('h4', null, size.gpus > 1 ? `Memory on each of ${size.gpus} GPUs` : 'Memory'));
  const shown = new Set();
  for (const c of size.components) {
    const formula = c.formula || decimal(c.gb, 2) + ' GB';
    shown.add(`${c.name}: ${formula}`);
    items.push(h('li', null, h('span', { class: 'name' }, componentLabel(c.name)), ': ', formula));
  }
  items.push(
    h('li', null, h('span', { class: 'name' }, 'Total'), ': ', size.gpus > 1 ? `${decimal(size.per_gpu_gb, 2)} GB per GPU, ${decimal(size.total_gb, 2)} GB across ${size.gpus} GPUs` : `${decimal(size.total_gb, 2)} GB`)
  );
  const outside = size.outside_allocator;
  if (outside) {
    items.push(h('li', null, h('span', { class: 'name' }, componentLabel(outside.name)), ': ', outside.formula || decimal(outside.gb, 2) + ' GB'));
    items.push(h('li', null, h('span', { class: 'name' }, 'On the card'), ': ', `${decimal(size.per_gpu_gb, 2)} + ${decimal(outside.gb, 2)} = ${decimal(size.card_gb, 2)} GB${size.gpus > 1 ? ' on each card' : ''}`));
  }
  if (fit.best && fit.best.explain) {
    items.push(h('h4', null, `Cheapest configuration: ${fit.best.configuration}`));
    for (const line of fit.best.explain) {
      // The components again, as above: only what the configuration adds (headroom, price...).
      if (shown.has(line)) continue;
      const m = /^([a-z_ ]+):\s(.*)$/.exec(line);
      items.push(m ? h('li', null, h('span', { class: 'name' }, componentLabel(m[1])), ': ', m[2]) : h('li', null, line));
    }
  }
  // A new result keeps the arithmetic open if the reader had opened it.
  const open = document.getElementById('arithmetic')?.open || undefined;
  return h('details', { class: 'arith', id: 'arithmetic', open }, h('summary', null, 'Show the arithmetic'), h('ul', { class: 'formulas' }, items));
}

function render(size, fit) {
  const perGpu = size.gpus > 1;
  // The detailed profile keeps the CUDA context outside the framework's peak (what published
  // measurements report); the card holds both, so the headline is card_gb.
  const outside = size.outside_allocator;
  const exact = outside
    ? `${decimal(size.card_gb, 2)} GB on ${perGpu ? `each of ${size.gpus} GPUs` : 'the GPU'}: ${decimal(size.per_gpu_gb, 2)} GB at PyTorch's peak + ${decimal(outside.gb, 2)} GB ${componentLabel(outside.name)}`
    : perGpu
      ? `per GPU (${decimal(size.per_gpu_gb, 2)} GB × ${size.gpus} GPUs = ${decimal(size.total_gb, 2)} GB)`
      : `${decimal(size.total_gb, 2)} GB of GPU memory`;
  const headline = h(
    'div',
    { class: 'result-total' },
    h('span', { class: 'big', id: 'total' }, decimal(outside ? size.card_gb : perGpu ? size.per_gpu_gb : size.total_gb, 0) + ' GB'),
    h('span', { class: 'exact' }, exact)
  );
  let verdict;
  if (fit.best) {
    const b = fit.best;
    verdict = h(
      'p',
      { class: 'verdict', id: 'verdict' },
      'Fits on ',
      h('a', { href: rentHref(b.gpu, b.count, { region: form.elements.region.value || undefined }), class: 'strong', 'data-testid': 'verdict-rent' }, configName(b)),
      ` for ${usd(b.exact.monthly_usd)}/month (${usd(b.exact.hourly_usd)}/hour), `,
      `${decimal(b.headroom_gb_per_card, 2)} GB spare${b.count > 1 ? ' per card' : ''}`,
      b.tight ? [' ', h('span', { class: 'badge badge-warn' }, 'tight')] : '',
      b.decode_ceiling_tok_s != null ? `; decode ceiling ${decimal(b.decode_ceiling_tok_s, 1)} tok/s.` : '.'
    );
  } else {
    verdict = h(
      'div',
      { class: 'alert alert-warn', id: 'verdict', role: 'status' },
      h('strong', null, 'No node of the fleet holds it (nodes have up to 8 cards). '),
      fit.reason || '',
      ' ',
      quoteLink(lastShared)
    );
  }
  const hostNote = size.host_gb > 0 ? h('p', { class: 'muted small' }, `Plus ${decimal(size.host_gb, 2)} GB of host memory (offloaded state).`) : null;
  const notes = [...new Set([...(size.notes || []), ...(fit.notes || [])])];
  replace(
    results,
    h(
      'div',
      { class: 'card' },
      h('div', { class: 'card-head' }, h('h2', null, 'Memory needed'), h('span', { class: 'hint' }, 'GB = 10⁹ bytes')),
      headline,
      modelLine(size.model, size.workload),
      verdict,
      stackBar(outside ? [...size.components, outside] : size.components),
      hostNote,
      arithmetic(size, fit),
      notes.length ? h('ul', { class: 'notes' }, notes.map((n) => h('li', null, n))) : null
    ),
    h(
      'div',
      { class: 'card' },
      h('div', { class: 'card-head' }, h('h2', null, 'Cheapest configurations'), h('span', { class: 'hint' }, 'Term fleet, list prices; cheapest first')),
      layoutNote(size.workload),
      fit.best ? configTable(fit) : h('div', { class: 'empty' }, fit.reason || 'No configuration holds this job.')
    )
  );
}

// ---------- running ----------

async function calculate() {
  clearFormErrors(form);
  syncVisibility();
  const shared = sharedFields();
  if (!shared) {
    // The previous result is not this input's: it goes, so that no stale answer is read.
    ++run;
    replace(results, h('div', { class: 'card' }, h('div', { class: 'empty' }, 'Fix the highlighted field to see the result.')));
    planFor(null);
    return;
  }
  writeUrl();
  const mine = ++run;
  results.setAttribute('aria-busy', 'true');
  const first = results.querySelector('.card');
  if (first) first.classList.add('stale');
  try {
    const [size, fit, spot] = await Promise.all([api('POST', '/v1/size', sizeBody(shared)), api('POST', '/v1/fit', fitBody(shared)), loadSpotNames()]);
    if (mine !== run) return;
    spotNames = spot;
    lastShared = shared;
    render(size, fit);
    // The plan of the same request, with the fit's filters (it prices every configuration), and
    // the cheapest to hold, so that the plan can say why the cheapest to finish differs.
    planFor(planBody(shared), fit.best);
  } catch (e) {
    if (mine !== run) return;
    revealField(e.field);
    if (!showFormError(form, e)) {
      replace(results, h('div', { class: 'card' }, errorBox(e.message)));
    } else {
      replace(results, h('div', { class: 'card' }, h('div', { class: 'empty' }, 'Fix the highlighted field to see the result.')));
    }
  } finally {
    if (mine === run) results.removeAttribute('aria-busy');
  }
}

// An error about a control inside a closed disclosure (advanced switches, filters) opens it, so
// that the message beside the control is seen and the control can take the focus.
function revealField(name) {
  if (!name) return;
  const el = form.querySelector(`[name="${CSS.escape(name)}"]`);
  const details = el && el.closest('details');
  if (details) details.open = true;
}

let timer = 0;
function calculateSoon() {
  clearTimeout(timer);
  timer = setTimeout(calculate, 250);
}

async function loadModels() {
  const select = MODEL_CONTROLS.bundled.el;
  try {
    const data = await api('GET', '/v1/models');
    bundledModels = data.bundled || [];
    replace(
      select,
      bundledModels.map((m) => h('option', { value: m.id }, `${m.id} (${paramsText(m.total_params)})`))
    );
    if (pendingBundled) selectBundled(pendingBundled);
  } catch (e) {
    bundledModels = [];
    replace(select, h('option', { value: '' }, 'The model list is not available'));
  }
}

async function loadRegions() {
  try {
    const catalog = await api('GET', '/v1/catalog');
    const select = form.elements.region;
    const wanted = new URLSearchParams(location.search).get('region');
    for (const r of catalog.regions) select.appendChild(h('option', { value: r.code }, `${r.code} ${r.city}`));
    if (wanted) select.value = wanted;
  } catch (e) {
    /* the filter stays at "any region" */
  }
}

function copyLink() {
  const status = $('#copy-status');
  const done = () => {
    status.textContent = 'Link copied';
    setTimeout(() => (status.textContent = ''), 2000);
  };
  if (navigator.clipboard && window.isSecureContext) {
    navigator.clipboard.writeText(location.href).then(done, () => (status.textContent = 'Copy the address bar to share'));
  } else {
    status.textContent = 'Copy the address bar to share';
  }
}

function main() {
  readUrl();
  syncVisibility();
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    await calculate();
    // On a phone the result is below the form: bring it into view after an explicit Calculate.
    if (window.matchMedia('(max-width: 900px)').matches && !form.querySelector('[aria-invalid="true"]')) {
      results.scrollIntoView({ behavior: 'smooth', block: 'start' });
    }
  });
  form.addEventListener('change', (e) => {
    if (e.target.name === 'source') {
      syncVisibility();
      if (source() === 'config' && !MODEL_CONTROLS.config.el.value.trim()) return;
    }
    calculateSoon();
  });
  form.addEventListener('input', (e) => {
    if (e.target.type === 'number') calculateSoon();
  });
  $('#copy-link').addEventListener('click', copyLink);
  const models = loadModels();
  loadRegions();
  if (source() === 'bundled') models.then(calculate);
  else calculate();
}

main();

// The calculator's "Time and cost to finish" section: POST /v1/plan with the calculator's own
// request (model, workload, switches, filters) plus the job (tokens and epochs to train, or tokens
// a day to serve). Every configuration that holds the job, ranked by its cost to finish on spot (the
// exchange's live asks) or on a weekly/monthly term; the arithmetic of the cheapest on demand. The
// section's inputs live in the URL as plan_<field>, beside the calculator's.
import { api } from './api.js';
import { h, $, replace, table, showFormError, clearFormErrors, errorBox } from './dom.js';
import { usd, decimal, integer, timestamp } from './format.js';
import { actionLinks, loadSpotNames, quoteHref, rentHref, spotHref } from './actions.js';

const form = $('#plan-form');
const out = $('#plan-results');
// The plan's inputs: [name, applies to 'training' | 'serving' | 'both'].
const FIELDS = [
  ['tokens', 'training'],
  ['epochs', 'training'],
  ['tokens_per_day', 'serving'],
  ['prompt_tokens', 'serving'],
  ['output_tokens', 'serving'],
  ['days', 'serving'],
  ['utilisation', 'both'],
  ['bandwidth_efficiency', 'serving'],
  ['start', 'both'],
];
const TOP = 8;

let shared = null; // the calculator's request: model, workload, switches, filters
let cheapestToHold = null; // the calculator's fit.best: the lowest monthly price that holds the memory
let spotNames = new Map(); // term card -> spot market (actions.js)
let run = 0;

function kind() {
  return shared && shared.workload === 'infer' ? 'serving' : 'training';
}

// Serving's "Sequences at once": a number (empty: the calculator's batch) or the largest batch
// that fits each configuration (batch "max", found by the plan).
function batchMax() {
  return form.querySelector('input[name="batch_mode"]:checked').value === 'max';
}

function syncVisibility() {
  const k = kind();
  for (const [name, applies] of FIELDS) {
    const on = applies === 'both' || applies === k;
    const el = form.elements[name];
    el.closest('.field').hidden = !on;
    el.disabled = !on;
  }
  const serving = k === 'serving';
  $('#plan-batch-field').hidden = !serving;
  for (const radio of form.querySelectorAll('input[name="batch_mode"]')) radio.disabled = !serving;
  const number = form.elements.batch;
  number.hidden = batchMax();
  number.disabled = !serving || batchMax();
  number.placeholder = shared && typeof shared.batch === 'number' ? `The batch above (${integer(shared.batch)})` : 'The batch above';
}

function numberOrText(value) {
  const t = String(value).trim();
  return /^\d{1,17}$/.test(t) ? Number(t) : t;
}

function body() {
  const b = { ...shared, explain: true, top: TOP };
  for (const [name] of FIELDS) {
    const el = form.elements[name];
    if (el.disabled) continue;
    const v = el.value.trim();
    if (v === '') continue;
    b[name] = name === 'start' || name === 'utilisation' || name === 'bandwidth_efficiency' ? v : numberOrText(v);
  }
  const batch = planBatch();
  if (batch !== null) b.batch = batch;
  return b;
}

// The plan's own batch ("max" or a number), or null: the calculator's.
function planBatch() {
  if (kind() !== 'serving') return null;
  if (batchMax()) return 'max';
  const v = form.elements.batch.value.trim();
  return v === '' ? null : numberOrText(v);
}

// plan_<field> in the URL, kept beside the calculator's own parameters.
function writeUrl() {
  const q = new URLSearchParams(location.search);
  for (const [name] of FIELDS) {
    const el = form.elements[name];
    const v = el.value.trim();
    if (!el.disabled && v !== '' && v !== el.defaultValue) q.set('plan_' + name, v);
    else q.delete('plan_' + name);
  }
  const batch = planBatch();
  if (batch !== null) q.set('plan_batch', String(batch));
  else q.delete('plan_batch');
  history.replaceState(null, '', '?' + q.toString());
}

function readUrl() {
  const q = new URLSearchParams(location.search);
  for (const [name] of FIELDS) {
    if (q.has('plan_' + name)) form.elements[name].value = q.get('plan_' + name);
  }
  const batch = q.get('plan_batch');
  form.querySelector(`input[name="batch_mode"][value="${batch === 'max' ? 'max' : 'number'}"]`).checked = true;
  if (batch !== null && batch !== 'max') form.elements.batch.value = batch;
}

// " (tp 2 x dp 4, batch 54)" after a verdict's configuration; nothing for a single card.
function layoutPhrase(o, batchAsked) {
  const bits = [];
  if (o.layout && o.layout.name && o.layout.name !== 'single') bits.push(o.layout.name);
  if (batchAsked && o.batch) bits.push(`batch ${integer(o.batch)}`);
  return bits.length ? ` (${bits.join(', ')})` : '';
}

function hours(hh) {
  if (hh >= 48) return decimal(hh / 24, 1) + ' days';
  return decimal(hh, hh < 10 ? 2 : 1) + ' h';
}

// The finish in the reader's locale, with UTC beside it when the reader is elsewhere (format.js).
function when(iso) {
  return iso ? timestamp(iso) : '—';
}

// A set beyond one node is named by its nodes ("12 nodes of 8× H100 SXM"): a quote, not a rental.
function configName(o) {
  if (needsQuote(o)) return `${integer(o.quote.nodes)} nodes of ${integer(o.quote.gpus_per_node)}× ${o.gpu}`;
  return o.count === 1 ? 'one ' + o.gpu : `${o.count}× ${o.gpu}`;
}

function needsQuote(o) {
  return !!(o.quote && o.quote.needed);
}

// The job for the quote request form: the calculator's request and the plan's own fields.
function quoteJob() {
  return quoteHref(body());
}

function quoteAction(o) {
  return h('a', { class: 'btn btn-small action-quote', href: quoteJob(), 'data-testid': 'plan-quote-link', 'aria-label': `Multi-node: request a quote for ${configName(o)}` }, 'Multi-node: request a quote');
}

// How the option's cards share the job ("tp 2 x dp 4 (ZeRO-3)"), and the batch the plan found
// when it was asked for the largest that fits.
function layoutCell(o, batchAsked) {
  const name = (o.layout && o.layout.name) || o.parallelism;
  return [
    h('span', { class: 'layout-name' }, name),
    batchAsked && o.batch ? h('span', { class: 'layout-batch', 'data-testid': 'plan-batch' }, `batch ${integer(o.batch)}`) : null,
    // A layout fixed by the request that the memory model says is over the card (the plan still
    // times it, ranked after every option that fits).
    o.memory_warning ? h('span', { class: 'badge badge-warn', title: o.memory_warning, 'data-testid': 'plan-memory-warning' }, 'may not fit') : null,
  ];
}

function optionTable(plan, batchAsked) {
  const serving = plan.job.kind === 'serving';
  const columns = [
    {
      label: 'Configuration',
      th: true,
      // The action of the cheaper way under the name: Buy spot first when spot finishes it for
      // less, else Rent (a column of its own would push the table past its card). A set of several
      // nodes is not rented whole: its action is a quote request.
      cell: (o) => [needsQuote(o) ? [o.configuration, h('span', { class: 'small' }, ` (${integer(o.quote.nodes)} nodes)`)] : o.configuration,
        o === plan.held ? [' ', h('span', { class: 'badge', 'data-testid': 'plan-held' }, 'cheapest to hold')] : null,
        h('div', { class: 'row-actions' }, needsQuote(o) ? quoteAction(o) : actionLinks({ gpu: o.gpu, count: o.count, region: shared && shared.region, term: termOf(o), spot: spotOf(o), prefer: o.best, rentable: !!o.term }))],
    },
    { label: batchAsked ? 'Layout, batch' : 'Layout', cell: (o) => layoutCell(o, batchAsked) },
    {
      label: serving ? 'Tokens/s each' : 'Tokens/s',
      num: true,
      cell: (o) => [integer(Math.round(o.tokens_per_s)), h('span', { class: 'range', title: 'The error bar: 9 in 10 published runs fell in this range' }, ` ${integer(Math.round(o.tokens_per_s_range[0]))}–${integer(Math.round(o.tokens_per_s_range[1]))}`)],
    },
    serving ? { label: 'Replicas', num: true, cell: (o) => integer(o.replicas) } : { label: 'Hours', num: true, cell: (o) => hours(o.hours) },
    { label: 'Finish', cell: (o) => when(o.finish) },
    {
      label: 'Spot',
      num: true,
      cell: (o) =>
        o.spot
          ? [usd(o.spot.exact.total_usd), o.spot.outlasts_offer ? h('span', { class: 'badge badge-warn', title: 'The offer ends before the job finishes' }, 'ends early') : null]
          : h('span', { class: 'muted' }, '—'),
    },
    { label: 'Term', num: true, cell: (o) => (o.term ? [usd(o.term.exact.total_usd), h('span', { class: 'muted small' }, ' ' + o.term.detail)] : h('span', { class: 'muted' }, '—')) },
    { label: 'Cost to finish', num: true, cell: (o) => [h('strong', null, usd(o.best === 'spot' ? o.spot.exact.total_usd : o.term.exact.total_usd)), ' ', h('span', { class: 'badge' }, o.best)] },
    { label: '$/M tokens', num: true, cell: (o) => usd(o.usd_per_million_tokens, 3) },
  ];
  const rows = plan.held ? [...plan.options, plan.held] : plan.options;
  return table(columns, rows, { rowClass: (o) => (o === plan.options[0] ? 'best' : o === plan.held ? 'held' : null), stack: true });
}

// The term the plan's cost assumes ("1 month + 1 week" -> the month is what to rent first).
// The spot market of a configuration: its term card's twin, or itself when it is spot only.
function spotOf(o) {
  return spotNames.get(o.gpu) || (o.spot ? o.gpu : null);
}

// Where the cheaper way of a configuration is bought: the market (spot) or the rent page (term).
function bestHref(o) {
  if (needsQuote(o)) return quoteJob();
  const region = shared && shared.region;
  return o.best === 'spot' && spotOf(o) ? spotHref(spotOf(o), o.count, { region }) : rentHref(o.gpu, o.count, { region, term: termOf(o) });
}

function termOf(o) {
  const d = o.term && o.term.detail ? String(o.term.detail) : '';
  return /month/.test(d) || !/week/.test(d) ? 'month' : 'week';
}

function cost(o) {
  return o.best === 'spot' ? o.spot.exact.total_usd : o.term.exact.total_usd;
}

// One sentence when the calculator's cheapest to hold (lowest monthly price with the memory) is
// not the plan's cheapest to finish: what each optimises, with the figures of both.
function whyTheyDiffer(plan) {
  const hold = cheapestToHold;
  const c = plan.cheapest;
  if (!hold || !c || (hold.gpu === c.gpu && hold.count === c.count)) return null;
  const held = plan.options.find((o) => o.gpu === hold.gpu && o.count === hold.count) || plan.held;
  const holdName = hold.count === 1 ? 'one ' + hold.gpu : `${hold.count}× ${hold.gpu}`;
  const serving = plan.job.kind === 'serving';
  const start = `${holdName.charAt(0).toUpperCase() + holdName.slice(1)} is the cheapest to hold (${usd(hold.exact.monthly_usd)} a month), but ${configName(c)} is the cheapest to finish this job`;
  let text;
  if (held && serving) {
    text = `${start}: it serves ${decimal(c.tokens_per_s / held.tokens_per_s, 1)}× the tokens per second, so ${integer(c.replicas)} replica${c.replicas === 1 ? '' : 's'} cost ${usd(cost(c))} against ${usd(cost(held))} for the ${integer(held.replicas)} of ${holdName} the job needs.`;
  } else if (held) {
    text = `${start}: it runs ${decimal(c.tokens_per_s / held.tokens_per_s, 1)}× as fast, so ${hours(c.hours)}${c.best === 'spot' ? ' of spot' : ''} cost ${usd(cost(c))} against ${usd(cost(held))} for ${hours(held.hours)} on ${holdName}.`;
  } else {
    text = `${start} (${usd(cost(c))}): ${serving ? 'it serves more tokens per dollar' : 'a faster card pays for fewer hours'}, and ${holdName} is not among the ${plan.options.length} cheapest to finish.`;
  }
  return h('p', { class: 'why-differ', id: 'plan-why', 'data-testid': 'plan-why' }, text);
}

function render(plan, batchAsked) {
  if (!plan.cheapest) {
    replace(out, h('div', { class: 'alert alert-warn', id: 'plan-verdict', role: 'status' }, h('strong', null, 'Nothing can be planned. '), plan.reason || ''));
    return;
  }
  const c = plan.cheapest;
  const serving = plan.job.kind === 'serving';
  const cost = c.best === 'spot' ? c.spot.exact.total_usd : c.term.exact.total_usd;
  const quote = needsQuote(c);
  const verdict = h(
    'p',
    { class: 'verdict', id: 'plan-verdict' },
    'Cheapest to finish: ',
    h('a', { class: 'strong', href: bestHref(c), 'data-testid': 'plan-verdict-action' }, quote ? `${configName(c)} — request a quote` : configName(c)),
    c.replicas > 1 ? ` × ${integer(c.replicas)} replicas` : '',
    layoutPhrase(c, batchAsked),
    ` on ${c.best === 'spot' ? 'spot' : 'a term'}, `,
    h('strong', null, usd(cost)),
    quote ? ' indicative' : '',
    serving ? ` for ${integer(plan.job.days)} days (${usd(c.usd_per_million_tokens, 3)} per million tokens).` : `, ${hours(c.hours)}, done ${when(c.finish)}.`
  );
  const f = plan.fastest;
  const fastest =
    !serving && f && f.configuration !== c.configuration
      ? h('p', { class: 'muted small', id: 'plan-fastest' }, `Fastest: ${configName(f)} in ${hours(f.hours)} for ${usd(f.best === 'spot' ? f.spot.exact.total_usd : f.term.exact.total_usd)}.`)
      : null;
  const notes = [
    `Error bar: the estimates were off by a median of ${decimal(plan.error_bar.median * 100, 0)}% and within ${decimal(plan.error_bar.p90 * 100, 0)}% for 9 in 10 published runs; the small range beside each tokens/s is that band.`,
    plan.prices === 'market' ? 'Spot: the exchange\'s live best asks, billed by the hour.' : 'Spot: the catalog\'s opening asks.',
    'Term: the cheapest mix of months (720 h) and weeks (168 h) that covers the hours.',
  ];
  if (plan.options.some(needsQuote)) notes.push('Beyond one node of 8 cards a set is a quote request: its prices are the list\'s, indicative.');
  if (plan.configurations > plan.options.length) notes.push(`${integer(plan.configurations - plan.options.length)} more configurations hold the job; the table lists the ${plan.options.length} cheapest${plan.held ? ', and last the calculator\'s cheapest to hold' : ''}.`);
  const open = document.getElementById('plan-arithmetic')?.open || undefined;
  replace(
    out,
    verdict,
    whyTheyDiffer(plan),
    fastest,
    optionTable(plan, batchAsked),
    h('p', { class: 'table-note' }, notes.join(' ')),
    h('details', { class: 'arith', id: 'plan-arithmetic', open }, h('summary', null, `Show the arithmetic (${c.configuration})`), h('ul', { class: 'formulas' }, (c.explain || []).map((line) => h('li', null, line))))
  );
}

async function calculate() {
  if (!shared) return;
  clearFormErrors(form);
  syncVisibility();
  writeUrl();
  const mine = ++run;
  out.setAttribute('aria-busy', 'true');
  try {
    const request = body();
    const [plan, spot] = await Promise.all([api('POST', '/v1/plan', request), loadSpotNames()]);
    if (mine !== run) return;
    spotNames = spot;
    plan.held = await heldOption(plan, request);
    if (mine !== run) return;
    render(plan, request.batch === 'max');
  } catch (e) {
    if (mine !== run) return;
    if (showFormError(form, e)) {
      replace(out, h('div', { class: 'empty' }, 'Fix the highlighted field to see the plan.'));
    } else if (calculatorHas(e.field)) {
      // A field of the calculator's (a parallelism degree the plan alone checks): the message
      // goes beside it, the plan says where to look.
      clearFormErrors(form);
      const details = calculatorForm().querySelector(`[name="${CSS.escape(e.field)}"]`).closest('details');
      if (details) details.open = true;
      showFormError(calculatorForm(), e);
      replace(out, h('div', { class: 'empty' }, 'Fix the highlighted field of the calculator above to see the plan.'));
    } else {
      replace(out, errorBox(e.message));
    }
  } finally {
    if (mine === run) out.removeAttribute('aria-busy');
  }
}

// The calculator's cheapest to hold, planned the same way, when it is not among the cheapest to
// finish: the table shows it too (a last row), so that the card the page recommends is never
// missing from the plan. The same request with the API's `gpu` filter; null when it cannot be
// planned (the filter's card, or its count, is not offered).
async function heldOption(plan, request) {
  const hold = cheapestToHold;
  if (!hold || !plan.cheapest) return null;
  const same = (o) => o.gpu === hold.gpu && o.count === hold.count;
  if (plan.options.some(same)) return null;
  try {
    const { explain, ...rest } = request;
    const only = await api('POST', '/v1/plan', { ...rest, gpu: hold.gpu, top: 16 });
    return (only.options || []).find(same) || null;
  } catch {
    return null;
  }
}

function calculatorForm() {
  return document.getElementById('calc');
}

function calculatorHas(field) {
  const calc = calculatorForm();
  return !!(field && calc && calc.querySelector(`[name="${CSS.escape(field)}"]:not([disabled])`));
}

let timer = 0;
function calculateSoon() {
  clearTimeout(timer);
  timer = setTimeout(calculate, 250);
}

// Called by the calculator with its current request (null while it has none).
export function planFor(request, holdBest = null) {
  shared = request;
  cheapestToHold = holdBest;
  if (!request) replace(out);
  syncVisibility();
  calculate();
}

// Large counts typed into a number field (which cannot hold separators) are repeated beside it
// with them: "100000000" reads as "100,000,000 tokens".
const ECHOED = ['tokens', 'tokens_per_day'];
function echoCounts() {
  for (const name of ECHOED) {
    const el = form.elements[name];
    let echo = el.parentElement.querySelector('.count-echo');
    if (!echo) {
      echo = h('span', { class: 'help count-echo', id: `echo-plan-${name}`, 'data-testid': `echo-${name}` });
      el.after(echo);
      el.setAttribute('aria-describedby', `${el.getAttribute('aria-describedby') || ''} echo-plan-${name}`.trim());
    }
    const v = el.value.trim();
    echo.textContent = /^\d{4,17}$/.test(v) ? `${integer(Number(v))} tokens` : '';
  }
}

readUrl();
echoCounts();
form.addEventListener('input', echoCounts);
form.addEventListener('submit', (e) => {
  e.preventDefault();
  calculate();
});
form.addEventListener('change', calculateSoon);
form.addEventListener('input', (e) => {
  if (e.target.type === 'number') calculateSoon();
});

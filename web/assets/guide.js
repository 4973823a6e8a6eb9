// The guide: every table from GET /v1/guide (and the preset shapes from GET /v1/models), laid out
// as the published tables. Nothing is computed here.
import { api } from './api.js';
import { h, $, replace, table, errorBox } from './dom.js';
import { usd, decimal, integer } from './format.js';
import { actionLinks, loadSpotNames, quoteHref } from './actions.js';
import { barChart } from './chart.js';

let spotNames = new Map();  // term card -> spot market (actions.js)

const CHEAPEST_COLUMNS = [
  { key: 'bf16', label: 'BF16 inference', query: { workload: 'infer', precision: 'bf16' } },
  { key: 'fp8', label: 'FP8 inference', query: { workload: 'infer', precision: 'fp8' } },
  { key: 'int4', label: 'INT4 inference', query: { workload: 'infer', precision: 'int4' } },
  { key: 'qlora', label: 'QLoRA', query: { workload: 'qlora' } },
  { key: 'lora', label: 'LoRA', query: { workload: 'lora' } },
  { key: 'full', label: 'Full fine-tune', query: { workload: 'full' } },
];

function section(id, title, hint, ...body) {
  return h(
    'section',
    { class: 'card section', id, 'aria-labelledby': id + '-title' },
    h('div', { class: 'card-head' }, h('h2', { id: id + '-title' }, title), hint ? h('span', { class: 'hint' }, hint) : null),
    body
  );
}

function presetCell(preset) {
  return h('a', { href: `/calculator/?model=${encodeURIComponent(preset)}&workload=infer` }, preset.toUpperCase());
}

function gbCell(value) {
  return value == null ? h('span', { class: 'muted' }, '—') : decimal(value, 2);
}

function kvTable(kv) {
  const rows = Object.entries(kv);
  return table(
    [
      { label: 'Model', th: true, cell: ([p]) => presetCell(p) },
      { label: 'Per token (MB)', num: true, cell: ([, r]) => decimal(r.per_token_mb, 2) },
      { label: '8k tokens', num: true, cell: ([, r]) => gbCell(r['8k']) },
      { label: '32k tokens', num: true, cell: ([, r]) => gbCell(r['32k']) },
      { label: '128k tokens', num: true, cell: ([, r]) => gbCell(r['128k']) },
    ],
    rows
  );
}

function inferenceTable(inf) {
  const rows = Object.entries(inf);
  const link = (p, precision, v) =>
    v == null ? h('span', { class: 'muted' }, '—') : h('a', { href: `/calculator/?model=${p}&workload=infer&precision=${precision}` }, decimal(v, 2));
  return table(
    [
      { label: 'Model', th: true, cell: ([p]) => presetCell(p) },
      { label: 'BF16', num: true, cell: ([p, r]) => link(p, 'bf16', r.bf16) },
      { label: 'FP8', num: true, cell: ([p, r]) => link(p, 'fp8', r.fp8) },
      { label: 'INT4', num: true, cell: ([p, r]) => link(p, 'int4', r.int4) },
    ],
    rows
  );
}

// The engine's LoRA/QLoRA figure, and beside it the published guide's where they differ by more
// than its rounding: a numbered mark points to the reason under the table.
function trainingTable(tr) {
  const rows = Object.entries(tr);
  const reasons = [];
  const withPublished = (p, method, value, published) => {
    const q = new URLSearchParams({ model: p, workload: method });
    const engine = h('a', { href: '/calculator/?' + q }, decimal(value, 2));
    if (!published) return engine;
    reasons.push({ id: `published-${p}-${method}`, text: `${p.toUpperCase()} ${method === 'lora' ? 'LoRA' : 'QLoRA'}: ${published.reason}` });
    const n = reasons.length;
    return [
      engine,
      h(
        'span',
        { class: 'published', dataset: { published: String(published.gb) } },
        ' (published ',
        decimal(published.gb, 0) + ' GB',
        h('a', { href: `#published-${p}-${method}`, 'aria-label': `reason ${n}` }, h('sup', null, String(n))),
        ')'
      ),
    ];
  };
  const t = table(
    [
      { label: 'Model', th: true, cell: ([p]) => presetCell(p) },
      { label: 'Full (16 B/param)', num: true, cell: ([, r]) => gbCell(r.full) },
      { label: 'Full +15%', num: true, cell: ([, r]) => gbCell(r.full_with_allowance) },
      { label: 'LoRA (BF16 base)', num: true, cell: ([p, r]) => withPublished(p, 'lora', r.lora, r.lora_published) },
      { label: 'QLoRA (NF4 base)', num: true, cell: ([p, r]) => withPublished(p, 'qlora', r.qlora, r.qlora_published) },
    ],
    rows
  );
  return [
    t,
    h(
      'p',
      { class: 'table-note' },
      'LoRA and QLoRA: frozen base + adapters + activations (the checkpoints of every layer, one layer recomputed, the logits) + 2 GB runtime, at sequence 2048 and batch 1; longer sequences and larger batches grow the activations. Where the published guide differs from the engine by more than its rounding, its figure is in brackets; the engine\'s is the one the cheapest-card table uses.'
    ),
    reasons.length ? h('ol', { class: 'table-note published-reasons' }, reasons.map((r) => h('li', { id: r.id }, r.text))) : null,
  ];
}

function cheapestTable(cheapest, reasons, multiNode) {
  const rows = Object.entries(cheapest);
  const columns = [{ label: 'Model', th: true, cell: ([p]) => presetCell(p) }];
  for (const col of CHEAPEST_COLUMNS) {
    columns.push({
      label: col.label,
      cls: 'cell-config',
      cell: ([p, r]) => {
        const c = r[col.key];
        const q = new URLSearchParams({ model: p, ...col.query });
        if (!c) {
          const why = reasons && reasons[p] && reasons[p][col.key];
          const quote = h('a', { href: quoteHref({ model: p, ...col.query }), class: 'quote-link small', 'aria-label': `request a quote: ${p} ${col.label}` }, 'request a quote');
          const multi = multiNode && multiNode[p] && multiNode[p][col.key];
          if (multi) {
            // No single node holds it: the nodes that would, and a quote request.
            return [
              h('a', { href: '/calculator/?' + q, title: why || '' }, multi.label),
              h('span', { class: 'price' }, usd(multi.monthly_usd) + '/mo, indicative'),
              quote,
            ];
          }
          return [h('a', { href: '/calculator/?' + q, class: 'muted', title: why || 'nothing fits' }, 'nothing fits'), quote];
        }
        return [
          h('a', { href: '/calculator/?' + q }, c.configuration),
          c.tight ? [' ', h('span', { class: 'badge badge-warn' }, 'tight')] : null,
          h('span', { class: 'price' }, usd(c.exact.monthly_usd) + '/mo'),
          h('div', { class: 'row-actions' }, actionLinks({ gpu: c.gpu, count: c.count, spot: spotNames.get(c.gpu) })),
        ];
      },
    });
  }
  return table(columns, rows);
}

function costTable(cost) {
  return table(
    [
      { label: 'Card', th: true, cell: (r) => [r.gpu, h('div', { class: 'row-actions' }, actionLinks({ gpu: r.gpu, count: 1, spot: spotNames.get(r.gpu) }))] },
      { label: 'VRAM', num: true, cell: (r) => decimal(r.vram_gb, 0) + ' GB' },
      { label: 'Monthly', num: true, cell: (r) => usd(r.monthly_usd) },
      { label: '$/GB-mo', num: true, cell: (r) => usd(r.usd_per_gb_month) },
      { label: 'Bandwidth', num: true, cell: (r) => (r.bandwidth_gb_per_s == null ? '—' : integer(r.bandwidth_gb_per_s) + ' GB/s') },
      { label: 'GB/s per $-mo', num: true, cell: (r) => (r.gb_s_per_usd_month == null ? '—' : decimal(r.gb_s_per_usd_month, 2)) },
      { label: 'Hourly', num: true, cell: (r) => usd(r.hourly_usd) },
      { label: 'Weekly', num: true, cell: (r) => [usd(r.weekly_usd), r.weekly_derived ? '*' : ''] },
      { label: 'Spot ask/h', num: true, cell: (r) => (r.spot_ask_usd_per_hour == null ? h('span', { class: 'muted' }, '—') : usd(r.spot_ask_usd_per_hour)) },
      { label: 'Break-even', num: true, cell: (r) => (r.break_even_hours == null ? h('span', { class: 'muted' }, '—') : integer(r.break_even_hours) + ' h') },
    ],
    cost
  );
}

// The cost per GB as bars, cheapest first: what a person would rather look at than read. Drawn at
// the section's width (again when it changes).
function costChart(cost) {
  const rows = cost
    .filter((r) => r.usd_per_gb_month != null)
    .slice()
    .sort((a, b) => a.usd_per_gb_month - b.usd_per_gb_month)
    .map((r, i) => ({ label: r.gpu, value: Number(r.usd_per_gb_month), text: usd(r.usd_per_gb_month) + '/GB-mo', highlight: i === 0 }));
  if (!rows.length) return null;
  const first = rows[0];
  const last = rows[rows.length - 1];
  const summary = `Monthly term price per GB of GPU memory, cheapest first: ${first.label} ${first.text}, ` +
    `${rows.length > 2 ? rows[1].label + ' ' + rows[1].text + ', … ' : ''}${last.label} ${last.text} (${decimal(Number(last.value) / Number(first.value), 1)}× the cheapest).`;
  const slot = h('div', { class: 'cost-chart', id: 'cost-chart' });
  const draw = () => replace(slot, barChart({ rows, summary, testid: 'cost-chart', width: Math.max(300, Math.round(slot.clientWidth || 640)) }));
  requestAnimationFrame(draw);
  let timer = null;
  window.addEventListener('resize', () => {
    clearTimeout(timer);
    timer = setTimeout(draw, 150);
  });
  return slot;
}

function shapesTable(presets) {
  return table(
    [
      { label: 'Preset', th: true, cell: (m) => presetCell(m.id) },
      { label: 'Parameters', num: true, cell: (m) => decimal(m.total_params / 1e9, 0) + 'B' },
      { label: 'Layers', num: true, cell: (m) => integer(m.layers) },
      { label: 'KV heads', num: true, cell: (m) => integer(m.kv_heads) },
      { label: 'Head dim', num: true, cell: (m) => integer(m.head_dim) },
      { label: 'Hidden', num: true, cell: (m) => integer(m.hidden) },
      { label: 'KV per token', num: true, cell: (m) => (m.kv_bytes_per_token == null ? '—' : integer(m.kv_bytes_per_token) + ' B') },
    ],
    presets
  );
}

async function main() {
  const root = $('#guide');
  let guide;
  try {
    [guide, spotNames] = await Promise.all([api('GET', '/v1/guide'), loadSpotNames()]);
  } catch (e) {
    replace(root, errorBox('The guide could not be loaded: ' + e.message));
    return;
  }
  replace(
    root,
    section('kv', 'KV cache by context', 'GB of FP16 cache at batch 1; per token in MB', kvTable(guide.kv_cache), h('p', { class: 'table-note' }, 'KV cache = 2 (K and V) × layers × KV heads × head dim × bytes per value × tokens × batch. An FP8 cache halves it.')),
    section('inference', 'Inference memory by precision', (guide.units && guide.units.inference) || 'GB per GPU', inferenceTable(guide.inference)),
    section('training', 'Training memory by method', 'GB on one GPU, with the guide\'s training assumptions', trainingTable(guide.training)),
    section('cheapest', 'Cheapest configuration by model and method', 'The cheapest term configuration that holds each job, no filters', cheapestTable(guide.cheapest, guide.cheapest_reasons, guide.cheapest_multi_node)),
    section('cost', 'Cost per GB', 'Term fleet at list prices, USD', costChart(guide.cost), costTable(guide.cost), h('p', { class: 'table-note' }, '* weekly price derived from the fleet\'s weekly/monthly ratio. Break-even: the hours a month on the spot exchange, at the opening ask, that cost as much as the monthly term.')),
    h('div', { id: 'shapes-slot' })
  );
  try {
    const models = await api('GET', '/v1/models');
    if (models.presets && models.presets.length) {
      replace($('#shapes-slot'), section('shapes', 'The guide\'s model shapes', 'Nominal parameter counts', shapesTable(models.presets)));
    }
  } catch (e) {
    /* the shapes table is optional */
  }
  if (location.hash) {
    const target = document.getElementById(location.hash.slice(1));
    if (target) target.scrollIntoView();
  }
}

main();

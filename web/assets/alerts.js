// Stock and price alerts (issue 29; POST/GET /v1/alerts, DELETE /v1/alerts/{id}): "Notify me" on
// the dead ends (a card none of which is free, a region without stock, a market without offers)
// and the account's list on its Notifications and alerts tab. The server decides when an alert
// fires (once each time its condition becomes true) and sends a notification and a webhook POST;
// the pages only make, list and cancel them.
import { api, currentSession } from './api.js';
import { h, $, replace, empty, errorBox, showFormError, clearFormErrors, setBusy } from './dom.js';
import { timestamp, perHour, count } from './format.js';

let serial = 0;
let listening = false;  // the account tab reloads its list when a Notify me elsewhere made one
const ACCOUNT_TAB = '/account/#notifications-section';

function what(spec) {
  if (spec.kind === 'price') {
    return spec.max_usd_per_gpu_hour
      ? `spot ${spec.gpu} is offered at or under ${perHour(spec.max_usd_per_gpu_hour, { book: true })}`
      : `spot ${spec.gpu} is offered`;
  }
  return `${spec.count === 1 ? '1' : count(spec.count) + ' ×'} ${spec.gpu} can be rented${spec.region ? ' in ' + spec.region : ''}`;
}

function field(id, label, control, name) {
  return h('div', { class: 'field' }, h('label', { for: id }, label), control, h('span', { class: 'field-error', id: 'err-' + id, 'data-error-for': name }));
}

// The "Notify me" control of a dead end. `spec`: {kind: 'stock', gpu, count, region, counts,
// regions} (the counts and regions the card is rented in, for the choices) or {kind: 'price', gpu
// (the spot market), price (a suggested threshold, optional)}. Signed out it leads to the log-in,
// which comes back here.
export function notifyMe(spec, { label } = {}) {
  const n = ++serial;
  const box = h('div', { class: 'notify-me', 'data-testid': 'notify-me' });
  const open = h('button', { type: 'button', class: 'btn btn-small btn-secondary', 'aria-expanded': 'false', 'aria-controls': `notify-form-${n}` },
    label || (spec.kind === 'price' ? 'Notify me of a price' : 'Notify me when free'));
  const slot = h('div', { id: `notify-form-${n}`, hidden: true });
  open.addEventListener('click', async () => {
    const showing = !slot.hidden;
    slot.hidden = showing;
    open.setAttribute('aria-expanded', String(!showing));
    if (showing) return;
    const session = await currentSession();
    if (!session) {
      replace(slot, h('p', { class: 'small' }, h('a', { href: '/account/?next=' + encodeURIComponent(location.pathname + location.search) }, 'Log in'), ' to be told when ' + what(spec) + '.'));
      return;
    }
    replace(slot, alertForm(spec, n, (alert) => {
      replace(box, done(alert));
    }));
    const first = slot.querySelector('select, input');
    if (first) first.focus();
  });
  box.append(open, slot);
  return box;
}

// What the person sees once the alert is made.
function done(alert) {
  return h('p', { class: 'small notify-done', role: 'status' },
    alert.holds_now ? h('strong', null, 'It holds now: ') : h('strong', null, 'Done: '),
    alert.holds_now ? `${alert.description} (notified). ` : `we will notify you when ${alert.description.charAt(0).toLowerCase()}${alert.description.slice(1)}, once each time it becomes true. `,
    h('a', { href: ACCOUNT_TAB }, 'Your alerts'));
}

// The small form of one alert, its choices filled from `spec`; `made(alert)` on success.
function alertForm(spec, n, made) {
  const controls = [];
  if (spec.kind === 'price') {
    controls.push(field(`notify-price-${n}`, 'At or under ($ per GPU-hour, empty: any offer)',
      h('input', { id: `notify-price-${n}`, name: 'max_usd_per_gpu_hour', type: 'text', inputmode: 'decimal', autocomplete: 'off', value: spec.price || '', placeholder: '2.500', 'aria-describedby': `err-notify-price-${n}` }), 'max_usd_per_gpu_hour'));
  } else {
    const counts = spec.counts && spec.counts.length ? spec.counts : [spec.count || 1];
    controls.push(field(`notify-count-${n}`, 'Cards', h('select', { id: `notify-count-${n}`, name: 'count', 'aria-describedby': `err-notify-count-${n}` },
      counts.map((c) => h('option', { value: String(c), selected: c === (spec.count || counts[0]) }, String(c)))), 'count'));
    const regions = spec.regions || [];
    controls.push(field(`notify-region-${n}`, 'Region', h('select', { id: `notify-region-${n}`, name: 'region', 'aria-describedby': `err-notify-region-${n}` },
      h('option', { value: '' }, 'Any region'),
      regions.map((r) => h('option', { value: r, selected: r === spec.region }, r))), 'region'));
  }
  const submit = h('button', { type: 'submit', class: 'btn btn-small' }, 'Notify me');
  const form = h('form', { class: 'notify-form', novalidate: true },
    h('div', { class: 'form-alert', 'aria-live': 'polite' }),
    h('input', { type: 'hidden', name: 'gpu', value: spec.gpu }),
    h('div', { class: 'field-row' }, controls),
    h('div', { class: 'form-actions' }, submit, h('span', { class: 'muted small' }, 'A notification, and a POST to your webhook if you have one')));
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    clearFormErrors(form);
    const body = { kind: spec.kind, gpu: spec.gpu };
    const f = new FormData(form);
    if (spec.kind === 'price') {
      const price = String(f.get('max_usd_per_gpu_hour') || '').trim();
      if (price) body.max_usd_per_gpu_hour = price;
    } else {
      body.count = Number(f.get('count'));
      if (f.get('region')) body.region = f.get('region');
    }
    setBusy(submit, true);
    try {
      made(await api('POST', '/v1/alerts', body));
      document.dispatchEvent(new CustomEvent('gpuhub:alerts'));
    } catch (err) {
      showFormError(form, err);
    } finally {
      setBusy(submit, false);
    }
  });
  return form;
}

function alertState(a) {
  const fired = a.fired_count > 0
    ? `fired ${count(a.fired_count)} ${a.fired_count === 1 ? 'time' : 'times'}, last ${timestamp(a.last_fired_at)}`
    : 'not fired yet';
  return [h('span', { class: 'badge ' + (a.holds_now ? 'badge-good' : '') }, a.holds_now ? 'holds now' : 'waiting'), ' ', h('span', { class: 'muted small' }, fired)];
}

// The account's alerts with Cancel, into `slot`; `#alerts-count` says how many of the limit.
export async function loadAlerts(slot = $('#alerts')) {
  if (!slot) return;
  try {
    const data = await api('GET', '/v1/alerts');
    const countSlot = $('#alerts-count');
    if (countSlot) countSlot.textContent = `${data.alerts.length} of at most ${data.limit}`;
    if (!data.alerts.length) {
      replace(slot, empty('No alerts. Make one below, or with "Notify me" where a card has none free or a market has no offer.'));
      return;
    }
    replace(slot, h('ul', { class: 'alert-list' }, data.alerts.map((a) => h('li', { dataset: { alert: String(a.id), kind: a.kind } },
      h('div', null, h('strong', null, a.description), h('div', null, alertState(a))),
      h('button', {
        type: 'button', class: 'btn btn-small btn-secondary', 'aria-label': `Cancel the alert: ${a.description}`,
        onclick: async (e) => {
          const button = e.currentTarget;
          setBusy(button, true);
          try {
            await api('DELETE', `/v1/alerts/${a.id}`);
            await loadAlerts(slot);
          } catch (err) {
            setBusy(button, false);
            replace(slot, errorBox('The alert could not be cancelled: ' + err.message));
          }
        },
      }, 'Cancel')))));
  } catch (err) {
    replace(slot, errorBox('Alerts could not be loaded: ' + err.message));
  }
}

// The account tab's form: a stock alert on any term card or a price alert on any spot market.
export async function startAlertsTab() {
  const host = $('#new-alert');
  if (!host) return;
  await loadAlerts();
  if (!listening) {
    listening = true;
    document.addEventListener('gpuhub:alerts', () => loadAlerts());
  }
  let catalog;
  try {
    catalog = await api('GET', '/v1/catalog');
  } catch (err) {
    replace(host, errorBox('The catalog could not be loaded: ' + err.message));
    return;
  }
  const term = (catalog.term || []).filter((c) => c.counts && c.counts.length);
  const spot = catalog.spot || [];
  const kind = h('select', { id: 'new-alert-kind', name: 'kind' },
    h('option', { value: 'stock' }, 'A term card can be rented'),
    h('option', { value: 'price' }, 'A spot price falls'));
  const gpu = h('select', { id: 'new-alert-gpu', name: 'gpu' });
  const formSlot = h('div');
  const fill = () => {
    const list = kind.value === 'price' ? spot.map((s) => s.name) : term.map((c) => c.name);
    const keep = gpu.value;
    replace(gpu, list.map((name) => h('option', { value: name, selected: name === keep }, name)));
    render();
  };
  const render = () => {
    const card = term.find((c) => c.name === gpu.value) || term[0];
    if (!gpu.value || (kind.value === 'stock' && !card)) return replace(formSlot, empty('Nothing to watch here right now.'));
    const spec = kind.value === 'price'
      ? { kind: 'price', gpu: gpu.value }
      : { kind: 'stock', gpu: card.name, count: card.counts[0], counts: card.counts, regions: card.regions };
    replace(formSlot, alertForm(spec, 'account', () => {
      loadAlerts();
      render();
      const status = $('#new-alert-status');
      if (status) status.textContent = 'Alert made: it is at the top of the list.';
    }));
  };
  kind.addEventListener('change', fill);
  gpu.addEventListener('change', render);
  replace(host,
    h('div', { class: 'field-row' },
      h('div', { class: 'field' }, h('label', { for: 'new-alert-kind' }, 'Tell me when'), kind),
      h('div', { class: 'field' }, h('label', { for: 'new-alert-gpu' }, 'Card or market'), gpu)),
    formSlot,
    h('p', { id: 'new-alert-status', class: 'small', role: 'status' }));
  fill();
}

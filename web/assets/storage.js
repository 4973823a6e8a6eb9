// The account page's Storage section: network volumes and snapshots (what each costs a day, what is
// paid, what happens when, attachments with the concurrent-writers warning, the unpaid path's
// times and a pay button), creating, growing, attaching, snapshotting, restoring and deleting them,
// and each live rental's extra NVMe and egress meter. Every figure comes from the API
// (/v1/storage, /v1/volumes, /v1/snapshots, /v1/rentals); the server checks every input and names
// the field it refuses, shown beside that field.
import { api, RequestKey } from './api.js';
import { h, $, replace, errorBox, empty, setBusy, showFormError, clearFormErrors } from './dom.js';
import { money, timestamp } from './format.js';

const REFRESH_MS = 10000;
const STATE_BADGE = { active: 'badge-good', read_only: 'badge-warn', detached: 'badge-bad', deleted: 'badge' };
const createKey = new RequestKey();
let started = false;
let loads = 0;  // #storage's data-loads: how many answers it has shown (tests wait for the next)
let refreshWallets = async () => {};
let rentals = [];  // the account's rentals, for attach choices and the egress meters
let customer = true;  // the signed-in account has the customer role (storage is a customer's)

// Money to the cent, as on every page (issue 29: "$1.333334 the next day" beside "$2.35"); a day
// of storage is often not a whole number of cents, and the API's answer keeps the exact figure.
function exact(value) {
  return money(value, 'USD', 2);
}

async function act(button, method, path, body) {
  const box = button.closest('[data-storage-item]') || $('#storage');
  const alert = box.querySelector('.storage-alert');
  setBusy(button, true);
  try {
    await api(method, path, body);
    await reloadStorage();
  } catch (err) {
    if (alert) {
      replace(alert, h('div', { class: 'alert alert-error', role: 'alert' }, err.message, err.status === 402 ? [' ', h('a', { href: '#topup-title' }, 'Top up')] : null));
    }
  } finally {
    setBusy(button, false);
  }
}

// Submits `form` through `run` (the API call): busy button, the server's error beside the field it
// names (or in the form's alert), the section reloaded on success.
function wire(form, run, onError) {
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    clearFormErrors(form);
    const btn = form.querySelector('button[type="submit"]');
    setBusy(btn, true);
    try {
      await run();
      await reloadStorage();
    } catch (err) {
      if (!showFormError(form, err) && onError) onError(err);
    } finally {
      setBusy(btn, false);
    }
  });
  return form;
}

// A small inline form: one number field and a button; errors beside the field.
function inlineForm({ cls, label, name, value, min, max, button, submit }) {
  const form = h(
    'form',
    { class: 'inline-form ' + cls, novalidate: true },
    h('div', { class: 'form-alert', 'aria-live': 'polite' }),
    h('label', null, label, ' ', h('input', { type: 'number', name, value: value == null ? '' : String(value), min, max, step: '1', inputmode: 'numeric', class: 'input-small' })),
    ' ',
    h('button', { type: 'submit', class: 'btn btn-small btn-secondary' }, button),
    h('span', { class: 'field-error', 'data-error-for': name })
  );
  return wire(form, () => {
    const raw = form.elements[name].value;
    return submit(raw === '' ? null : Number(raw));
  });
}

function scheduleList(item) {
  if (!item.schedule.length) return null;
  return h(
    'ul',
    { class: 'schedule small' },
    item.schedule.map((s) => h('li', null, h('strong', null, timestamp(s.at)), ': ', s.what))
  );
}

function unpaidBlock(item, kind) {
  const u = item.bill.unpaid;
  if (!u) return null;
  const detached = item.state === 'detached';
  return h(
    'div',
    { class: 'alert alert-error unpaid', dataset: { state: item.state } },
    h(
      'p',
      null,
      h('strong', null, kind === 'volume' ? (detached ? 'Unpaid: detached.' : 'Unpaid: read-only.') : 'Unpaid: it cannot be restored.'),
      ` The day from ${timestamp(u.since)} could not be paid. `,
      detached ? null : [kind === 'volume' ? 'It is detached from every instance at ' : 'It is suspended at ', h('strong', null, timestamp(u.detach_at)), ', and '],
      'deleted for good at ',
      h('strong', { class: 'delete-at' }, timestamp(u.delete_at)),
      ' unless paid before. Retried every hour after a top-up.'
    ),
    h(
      'button',
      { type: 'button', class: 'btn btn-small pay-storage', onclick: (e) => act(e.currentTarget, 'POST', `/v1/${kind === 'volume' ? 'volumes' : 'snapshots'}/${item.id}/pay`) },
      `Pay ${exact(u.due)} now`
    )
  );
}

function billFacts(item) {
  const b = item.bill;
  return [
    h('dt', null, 'Cost'),
    h('dd', { class: 'cost' }, `${exact(b.price.next_day)} the next day`, h('span', { class: 'muted small' }, ` (${money(b.price.per_month, 'USD')} per 30 days, ${money(b.price.per_tb_month, 'USD')} per TB-month, from the ${b.wallet} wallet)`)),
    b.paid_through ? [h('dt', null, 'Paid through'), h('dd', { class: 'paid-through' }, timestamp(b.paid_through))] : null,
  ];
}

function liveRentalsIn(region) {
  return rentals.filter((r) => r.region === region && r.state !== 'released');
}

function attachControls(v) {
  if (v.state !== 'active') return null;
  const options = liveRentalsIn(v.region).filter((r) => !v.attachments.some((a) => a.rental_id === r.id));
  if (!options.length) {
    return h('p', { class: 'muted small' }, `Rent an instance in ${v.region} to attach it (a volume attaches only within its region).`);
  }
  const select = h('select', { name: 'rental_id', class: 'attach-rental', 'aria-label': `Attach volume ${v.id} to` }, options.map((r) => h('option', { value: String(r.id) }, `rental ${r.id}: ${r.count}× ${r.gpu}`)));
  const form = h(
    'form',
    { class: 'inline-form attach-form', novalidate: true },
    h('div', { class: 'form-alert', 'aria-live': 'polite' }),
    select,
    ' ',
    h('button', { type: 'submit', class: 'btn btn-small attach' }, 'Attach'),
    h('span', { class: 'field-error', 'data-error-for': 'rental_id' })
  );
  return wire(form, () => api('POST', `/v1/volumes/${v.id}/attach`, { rental_id: Number(select.value) }));
}

function deleteControls(item, kind) {
  if (item.state === 'deleted') return null;
  const attached = kind === 'volume' && item.attachments.length > 0;
  const confirm = h(
    'div',
    { class: 'alert alert-error delete-confirm', role: 'alertdialog', 'aria-label': 'Confirm deletion', hidden: true },
    h('p', null, h('strong', null, `Delete this ${kind} now?`), ' Its data is destroyed and cannot be recovered; the day already paid is not refunded.'),
    h(
      'div',
      { class: 'form-actions' },
      h('button', { type: 'button', class: 'btn btn-danger confirm-delete', onclick: (e) => act(e.currentTarget, 'DELETE', `/v1/${kind === 'volume' ? 'volumes' : 'snapshots'}/${item.id}`) }, 'Delete, data destroyed'),
      h('button', { type: 'button', class: 'btn btn-secondary', onclick: (e) => (e.currentTarget.closest('.delete-confirm').hidden = true) }, 'Keep it')
    )
  );
  const open = h(
    'button',
    { type: 'button', class: 'btn btn-small btn-secondary delete', disabled: attached, title: attached ? 'Detach it from every instance first' : null, onclick: () => { confirm.hidden = false; confirm.querySelector('.confirm-delete').focus(); } },
    'Delete…'
  );
  return [open, confirm];
}

function volumeItem(v) {
  const shared = v.attachments.length > 1;
  return h(
    'article',
    { class: 'storage-item card', id: 'volume-' + v.id, dataset: { storageItem: 'volume', volume: String(v.id), state: v.state } },
    h(
      'header',
      { class: 'card-head' },
      h('h3', null, `Volume ${v.id}${v.name ? ' · ' + v.name : ''}`, h('span', { class: 'muted small' }, ` · ${v.size_tb} TB · ${v.region} · ${v.replicas} copies`)),
      h('span', { class: 'badge state ' + (STATE_BADGE[v.state] || '') }, v.state.replace('_', '-'))
    ),
    h(
      'dl',
      { class: 'rental-facts' },
      h('dt', null, 'Access'),
      h('dd', { class: 'access' }, v.access.replace('_', '-')),
      h('dt', null, 'Attached to'),
      h(
        'dd',
        { class: 'attachments' },
        v.attachments.length
          ? v.attachments.map((a) =>
              h('span', { class: 'attachment', dataset: { rental: String(a.rental_id) } }, `rental ${a.rental_id} (${a.count}× ${a.gpu}) `, h('button', { type: 'button', class: 'btn btn-small btn-secondary detach', onclick: (e) => act(e.currentTarget, 'POST', `/v1/volumes/${v.id}/detach`, { rental_id: a.rental_id }) }, 'Detach'), ' ')
            )
          : 'no instance'
      ),
      v.restored_from ? [h('dt', null, 'Restored from'), h('dd', null, `snapshot ${v.restored_from}`)] : null,
      billFacts(v)
    ),
    shared ? h('p', { class: 'alert alert-warn concurrent-writers', role: 'note' }, 'Shared by several instances: it is one filesystem, so concurrent writers must coordinate (a cluster filesystem, or one writer and the others reading). Two instances writing the same files corrupt them.') : null,
    unpaidBlock(v, 'volume'),
    scheduleList(v),
    v.state === 'deleted'
      ? h('p', { class: 'muted small' }, `Deleted ${timestamp(v.bill.deleted_at)}${v.bill.delete_reason === 'unpaid' ? ' (unpaid)' : ''}.`)
      : h(
          'div',
          { class: 'rental-actions' },
          attachControls(v),
          v.state === 'active'
            ? inlineForm({ cls: 'resize-form', label: 'Grow to', name: 'size_tb', value: v.size_tb + 1, min: v.size_tb + 1, max: 100, button: 'Grow (TB)', submit: (size_tb) => api('POST', `/v1/volumes/${v.id}/resize`, { size_tb }) })
            : null,
          v.state === 'active'
            ? h('button', { type: 'button', class: 'btn btn-small btn-secondary snapshot', onclick: (e) => act(e.currentTarget, 'POST', '/v1/snapshots', { volume_id: v.id }) }, 'Snapshot')
            : null,
          deleteControls(v, 'volume')
        ),
    h('div', { class: 'storage-alert', 'aria-live': 'polite' })
  );
}

function snapshotItem(s) {
  const source = s.source.kind === 'volume' ? `volume ${s.source.volume_id}` : `the local NVMe of rental ${s.source.rental_id}`;
  return h(
    'article',
    { class: 'storage-item card', id: 'snapshot-' + s.id, dataset: { storageItem: 'snapshot', snapshot: String(s.id), state: s.state } },
    h(
      'header',
      { class: 'card-head' },
      h('h3', null, `Snapshot ${s.id}${s.name ? ' · ' + s.name : ''}`, h('span', { class: 'muted small' }, ` · ${s.size_tb} TB · ${s.region} · copy of ${source}`)),
      h('span', { class: 'badge state ' + (STATE_BADGE[s.state] || '') }, s.state.replace('_', '-'))
    ),
    h('dl', { class: 'rental-facts' }, billFacts(s)),
    unpaidBlock(s, 'snapshot'),
    scheduleList(s),
    s.state === 'deleted'
      ? h('p', { class: 'muted small' }, `Deleted ${timestamp(s.bill.deleted_at)}.`)
      : h(
          'div',
          { class: 'rental-actions' },
          s.restorable
            ? inlineForm({ cls: 'restore-form', label: `New volume in ${s.region} of`, name: 'size_tb', value: s.size_tb, min: s.size_tb, max: 100, button: 'Restore (TB)', submit: (size_tb) => api('POST', `/v1/snapshots/${s.id}/restore`, size_tb == null ? {} : { size_tb }) })
            : null,
          deleteControls(s, 'snapshot')
        ),
    h('div', { class: 'storage-alert', 'aria-live': 'polite' })
  );
}

// Each live rental's extra NVMe (add more) and egress meter this term.
function rentalStorage(r) {
  const st = r.storage || {};
  const e = (st.egress || {}).current;
  const tb = (bytes) => (Number(bytes) / 1e12).toFixed(3);
  return h(
    'li',
    { class: 'rental-storage', dataset: { rental: String(r.id) } },
    h('strong', null, `Rental ${r.id}`), ` (${r.count}× ${r.gpu}, ${r.region}): `,
    `${r.instance.nvme_gb / 1000} TB included + ${st.extra_nvme_tb || 0} TB extra NVMe. `,
    e
      ? h('span', { class: 'egress' }, `Egress this term: ${tb(e.used_bytes)} of ${tb(e.included_bytes)} TB included`, e.billed_gb ? `; ${e.billed_gb} GB beyond it billed` : '', e.owed_gb ? h('strong', { class: 'owed' }, `; ${e.owed_gb} GB owed (top up)`) : '', '.')
      : null,
    r.state === 'active'
      ? inlineForm({ cls: 'nvme-form', label: 'Add', name: 'add_tb', value: 1, min: 1, max: 30, button: 'TB of extra NVMe', submit: (add_tb) => api('POST', `/v1/rentals/${r.id}/extra-nvme`, { add_tb }) })
      : null
  );
}

function createForm(regions) {
  const form = h(
    'form',
    { id: 'volume-form', class: 'inline-form', novalidate: true },
    h('div', { class: 'form-alert', 'aria-live': 'polite' }),
    h('div', { class: 'field-row' },
      h('div', { class: 'field' },
        h('label', { for: 'volume-region' }, 'Region'),
        h('select', { id: 'volume-region', name: 'region' }, regions.map((r) => h('option', { value: r.region }, `${r.region} (${r.free_tb} TB free)`))),
        h('span', { class: 'field-error', 'data-error-for': 'region' })),
      h('div', { class: 'field' },
        h('label', { for: 'volume-size' }, 'Size (TB)'),
        h('input', { id: 'volume-size', name: 'size_tb', type: 'number', min: '1', max: '100', step: '1', value: '1', inputmode: 'numeric' }),
        h('span', { class: 'field-error', 'data-error-for': 'size_tb' })),
      h('div', { class: 'field' },
        h('label', { for: 'volume-name' }, 'Name (optional)'),
        h('input', { id: 'volume-name', name: 'name', type: 'text', autocomplete: 'off', spellcheck: 'false', maxlength: '64' }),
        h('span', { class: 'field-error', 'data-error-for': 'name' }))
    ),
    h('p', { class: 'muted small' }, '$14 per TB-month, billed daily in advance from your USD wallet (30 days cost exactly the month); 3 copies on distinct storage hosts of the region; kept after every rental ends, until you delete it. Volumes grow but never shrink.'),
    h('div', { class: 'form-actions' }, h('button', { type: 'submit', class: 'btn', id: 'volume-create' }, 'Create volume'))
  );
  return wire(
    form,
    async () => {
      const body = { region: form.elements.region.value, size_tb: form.elements.size_tb.value === '' ? null : Number(form.elements.size_tb.value) };
      if (form.elements.name.value) body.name = form.elements.name.value;
      await api('POST', '/v1/volumes', body, { idempotencyKey: createKey.for(body) });
      createKey.done();
      form.elements.name.value = '';
    },
    (err) => {
      if (err.status === 402) form.querySelector('.form-alert').append(' ', h('a', { href: '#topup-title' }, 'Top up'));
    }
  );
}

export async function loadStorage() {
  const slot = $('#storage');
  if (!customer) {
    // Volumes and snapshots are a customer's: a provider-only account would get a 403 here.
    replace(slot, empty('Storage needs the customer role.'));
    return;
  }
  try {
    const [info, volumes, snapshots, mine] = await Promise.all([
      api('GET', '/v1/storage'),
      api('GET', '/v1/volumes?limit=100'),
      api('GET', '/v1/snapshots?limit=100'),
      api('GET', '/v1/rentals?limit=100'),
    ]);
    rentals = mine.rentals;
    const live = rentals.filter((r) => r.state !== 'released');
    // Keep what is being typed in the create form across refreshes.
    const form = $('#volume-form') || createForm(info.regions);
    replace(
      slot,
      h('p', { class: 'storage-cost', 'data-testid': 'storage-daily' }, 'Storage costs ', h('strong', null, exact(volumes.daily_cost.next_day)), ` the next day in all (${volumes.daily_cost.tb} TB of volumes and snapshots), tax excluded.`),
      h('h3', null, 'New network volume'),
      form,
      h('h3', null, 'Volumes'),
      volumes.volumes.length ? h('div', { class: 'volumes' }, volumes.volumes.map(volumeItem)) : empty('No volumes yet.'),
      h('h3', null, 'Snapshots'),
      snapshots.snapshots.length ? h('div', { class: 'snapshots' }, snapshots.snapshots.map(snapshotItem)) : empty('No snapshots yet. Snapshot a volume, or the local NVMe of a running rental below.'),
      h('h3', null, 'Local NVMe and egress of your rentals'),
      live.length
        ? h('ul', { class: 'rental-storage-list' }, live.map((r) => {
            // The snapshot button inside its rental's item (a list holds only items).
            const item = rentalStorage(r);
            if (r.state === 'active') {
              item.append(h('button', { type: 'button', class: 'btn btn-small btn-secondary snapshot-nvme', dataset: { rental: String(r.id) }, onclick: (e) => act(e.currentTarget, 'POST', '/v1/snapshots', { rental_id: r.id }) }, `Snapshot rental ${r.id}'s local NVMe`));
            }
            return item;
          }))
        : empty('No live rentals.'),
      h('p', { class: 'muted small' }, `Egress: ${info.prices.egress_included_tb_per_month} TB per rental per 30 days included (a week: 7/30 of it), then ${money(info.prices.egress_per_tb, 'USD')} per TB, charged by the whole GB as it is measured. Extra NVMe: ${money(info.prices.extra_nvme_per_tb_month, 'USD')} per TB-month, prorated to the term end, then renewed with the rental.`),
      h('div', { class: 'storage-alert', 'aria-live': 'polite' })
    );
    slot.dataset.loads = String(++loads);
  } catch (err) {
    replace(slot, errorBox('Storage could not be loaded: ' + err.message));
  }
}

async function reloadStorage() {
  await Promise.all([loadStorage(), refreshWallets()]);
}

// Loads the section and keeps it current while the page is open; `refresh` reloads the wallets.
// `isCustomer`: the signed-in account may buy storage (only a customer's is asked for).
export function startStorage(refresh, isCustomer = true) {
  refreshWallets = refresh;
  customer = isCustomer;
  if (!started) {
    started = true;
    setInterval(() => {
      // Not while a form is being filled in: a refresh would replace what is typed.
      const typing = document.activeElement && $('#storage').contains(document.activeElement);
      if (!document.hidden && !$('#signed-in').hidden && !typing) loadStorage();
    }, REFRESH_MS);
    $('#refresh-storage').addEventListener('click', () => reloadStorage());
  }
  return loadStorage();
}

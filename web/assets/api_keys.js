// API keys of the account (GET/POST /v1/api-keys, DELETE /v1/api-keys/{id}): scoped credentials
// for scripts. The secret is in the create answer only and is shown here once; the server keeps
// its hash. The server checks every field and names the one at fault.
import { api } from './api.js';
import { h, $, replace, table, showFormError, clearFormErrors, setBusy, errorBox, empty, copyableCommand } from './dom.js';
import { timestamp } from './format.js';

const form = $('#api-key-form');

export async function loadApiKeys() {
  const slot = $('#api-key-list');
  try {
    const data = await api('GET', '/v1/api-keys');
    if (!data.api_keys.length) return replace(slot, empty('No API keys: scripts use a key instead of your password.'));
    replace(
      slot,
      table(
        [
          { label: 'Name', th: true, cell: (k) => k.name },
          { label: 'Key', cell: (k) => h('code', {}, `${k.prefix}…`) },
          { label: 'Scopes', cell: (k) => k.scopes.join(', ') },
          {
            label: 'Daily cap',
            cell: (k) => (k.spend_cap_per_day
              ? `${k.spent_today.amount} of ${k.spend_cap_per_day.amount} ${k.spend_cap_per_day.currency}`
              : '—'),
          },
          { label: 'From', cell: (k) => (k.allowed_cidrs.length ? k.allowed_cidrs.join(', ') : 'anywhere') },
          { label: 'Expires', cls: 'nowrap', cell: (k) => (k.expired ? 'expired ' : '') + timestamp(k.expires_at) },
          { label: '', cell: revokeButton },
        ],
        data.api_keys,
        { stack: true }
      )
    );
  } catch (e) {
    replace(slot, errorBox('API keys could not be loaded: ' + e.message));
  }
}

function revokeButton(key) {
  return h('button', {
    type: 'button',
    class: 'btn btn-small btn-secondary',
    'aria-label': `Revoke API key ${key.name}`,
    onclick: async (e) => {
      setBusy(e.currentTarget, true);
      try {
        await api('DELETE', `/v1/api-keys/${key.id}`);
      } catch (err) {
        replace($('#api-key-list'), errorBox(err.message));
        return;
      }
      await loadApiKeys();
    },
  }, 'Revoke');
}

function lines(text) {
  return text.split(/[\s,]+/).map((s) => s.trim()).filter(Boolean);
}

async function onCreate(e) {
  e.preventDefault();
  clearFormErrors(form);
  const el = form.elements;
  const body = {
    name: el.name.value.trim(),
    scopes: [...form.querySelectorAll('input[name="scopes"]:checked')].map((c) => c.value),
  };
  if (el.spend_cap_per_day.value.trim()) {
    body.spend_cap_per_day = el.spend_cap_per_day.value.trim();
    body.spend_cap_currency = el.spend_cap_currency.value;
  }
  if (el.expires_at.value) body.expires_at = `${el.expires_at.value}T00:00:00Z`;
  if (lines(el.allowed_cidrs.value).length) body.allowed_cidrs = lines(el.allowed_cidrs.value);
  if (el.totp_code.value.trim()) body.totp_code = el.totp_code.value.trim();
  const button = $('#api-key-submit');
  setBusy(button, true);
  try {
    const key = await api('POST', '/v1/api-keys', body);
    form.reset();
    replace(
      $('#api-key-secret'),
      h('div', { class: 'alert alert-ok', role: 'status' },
        h('p', {}, `Key “${key.name}” made. Copy its secret now: it is not shown again.`),
        copyableCommand(key.secret, `the secret of API key ${key.name}`))
    );
    await loadApiKeys();
  } catch (err) {
    showFormError(form, err);
  } finally {
    setBusy(button, false);
  }
}

export function initApiKeys() {
  form.addEventListener('submit', onCreate);
}

// SSH keys on the account (GET/POST /v1/ssh-keys, DELETE /v1/ssh-keys/{id}): the host agent puts
// them in the authorized_keys of every machine the account rents. The server parses each key and
// refuses what is not an ed25519, ECDSA or RSA (>= 2048 bits) public key, naming the field.
import { api, RequestKey } from './api.js';
import { h, $, replace, table, showFormError, clearFormErrors, setBusy, errorBox, empty } from './dom.js';
import { integer, timestamp } from './format.js';

const form = $('#ssh-key-form');
const addKey = new RequestKey();

export async function loadSshKeys() {
  const slot = $('#ssh-key-list');
  try {
    const data = await api('GET', '/v1/ssh-keys');
    if (!data.ssh_keys.length) {
      return replace(slot, empty('No keys yet: add one before you rent, or you cannot log in to the machine.'));
    }
    replace(
      slot,
      table(
        [
          { label: 'Name', th: true, cell: (k) => k.name },
          { label: 'Type', cell: (k) => `${k.type} (${integer(k.bits)} bits)` },
          { label: 'Fingerprint', cell: (k) => h('code', { class: 'connection-line' }, k.fingerprint) },
          { label: 'Added', cls: 'nowrap', cell: (k) => timestamp(k.created_at) },
          { label: '', cell: removeButton },
        ],
        data.ssh_keys,
        { stack: true }
      )
    );
  } catch (e) {
    replace(slot, errorBox('SSH keys could not be loaded: ' + e.message));
  }
}

function removeButton(key) {
  return h('button', {
    type: 'button',
    class: 'btn btn-small btn-secondary',
    'aria-label': `Remove SSH key ${key.name}`,
    onclick: async (e) => {
      setBusy(e.currentTarget, true);
      try {
        await api('DELETE', `/v1/ssh-keys/${key.id}`);
      } catch (err) {
        replace($('#ssh-key-list'), errorBox(err.message));
        return;
      }
      await loadSshKeys();
    },
  }, 'Remove');
}

async function onAdd(e) {
  e.preventDefault();
  clearFormErrors(form);
  const body = { public_key: form.elements.public_key.value.trim() };
  if (!body.public_key) return showFormError(form, { field: 'public_key', message: 'Paste your public key.' });
  if (form.elements.name.value.trim()) body.name = form.elements.name.value.trim();
  const button = $('#ssh-key-submit');
  setBusy(button, true);
  try {
    await api('POST', '/v1/ssh-keys', body, { idempotencyKey: addKey.for(body) });
    addKey.done();
    form.reset();
    await loadSshKeys();
  } catch (err) {
    showFormError(form, err);
  } finally {
    setBusy(button, false);
  }
}

export function initSshKeys() {
  form.addEventListener('submit', onAdd);
}

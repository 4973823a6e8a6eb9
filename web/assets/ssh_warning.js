// The order pages (market bid, rent) warn before buying when the account has no SSH key: the
// machine lets only the account's keys log in, so a machine bought without one cannot be reached.
// The warning offers to add one on the spot (POST /v1/ssh-keys: the server checks the key and
// names the field it refuses) and links to the account's SSH keys.
import { api, RequestKey } from './api.js';
import { h, replace, setBusy } from './dom.js';
import { errorSentence } from './errors.js';

const addKey = new RequestKey();

// The small form inside the warning. The warning sits inside the order's own <form>, so this is
// no form of its own (a nested form's submit would reach the order's) and its controls carry no
// name (the order's FormData must not take them): a textarea and a button.
function addForm(slot) {
  const error = h('span', { class: 'field-error', id: 'err-ssh-inline-key', role: 'alert' });
  const key = h('textarea', { id: 'ssh-inline-key', rows: '2', spellcheck: 'false', autocomplete: 'off', placeholder: 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5… you@laptop', 'aria-describedby': 'help-ssh-inline-key err-ssh-inline-key' });
  const submit = h('button', { type: 'button', class: 'btn btn-small' }, 'Add this key');
  const fail = (message) => {
    key.setAttribute('aria-invalid', 'true');
    error.textContent = message;
    key.focus();
  };
  submit.addEventListener('click', async () => {
    key.removeAttribute('aria-invalid');
    error.textContent = '';
    const body = { public_key: key.value.trim() };
    if (!body.public_key) return fail('Paste your public key.');
    setBusy(submit, true);
    try {
      await api('POST', '/v1/ssh-keys', body, { idempotencyKey: addKey.for(body) });
      addKey.done();
      await sshKeyWarning(slot);
    } catch (err) {
      // "public_key ..." reads as the control's label.
      fail(errorSentence({ ...err, message: err.message.replace(/^public_key\b/, 'The public key') }, null));
    } finally {
      setBusy(submit, false);
    }
  });
  // Enter in the textarea must not submit the order around it.
  key.addEventListener('keydown', (e) => e.stopPropagation());
  key.addEventListener('change', (e) => e.stopPropagation());
  return h('div', { class: 'ssh-inline-form', 'data-testid': 'ssh-inline-form' },
    h('div', { class: 'field' },
      h('label', { for: 'ssh-inline-key' }, 'Public key'),
      key,
      h('span', { class: 'help', id: 'help-ssh-inline-key' }, 'The one line of your ', h('code', null, '~/.ssh/id_ed25519.pub'), ' (never the private key).'),
      error),
    h('div', { class: 'form-actions' }, submit));
}

// Fills `slot` with the warning when the signed-in account has no key, empties it otherwise.
// Resolves to the number of keys (null when they could not be read: no warning then).
export async function sshKeyWarning(slot) {
  if (!slot) return null;
  try {
    const data = await api('GET', '/v1/ssh-keys');
    const n = data.ssh_keys.length;
    if (n > 0) {
      replace(slot);
      slot.hidden = true;
    } else {
      const open = h('button', { type: 'button', class: 'btn-link', 'aria-expanded': 'false', 'data-testid': 'add-ssh-key-here' }, 'add one here');
      const formSlot = h('div', { hidden: true });
      open.addEventListener('click', () => {
        formSlot.hidden = !formSlot.hidden;
        open.setAttribute('aria-expanded', String(!formSlot.hidden));
        if (!formSlot.hidden) {
          if (!formSlot.firstChild) formSlot.appendChild(addForm(slot));
          formSlot.querySelector('textarea').focus();
        }
      });
      replace(slot, h('p', null, h('strong', null, 'Your account has no SSH key. '),
        'The machine lets only your account\'s keys log in, so you could not connect to it. ',
        'Paste your public key: ', open, ', or ',
        h('a', { href: '/account/#ssh-keys', 'data-testid': 'add-ssh-key' }, 'add an SSH key on your account'), ' (it takes a minute), then come back.'), formSlot);
      slot.hidden = false;
    }
    return n;
  } catch {
    replace(slot);
    slot.hidden = true;
    return null;
  }
}
